"""One HTTP client for the tests' requests to the servers they start.

httpx's module functions (``httpx.get`` …) make a client per call, and that client's TLS
context costs ~27 ms of CPU every time, even for plain http to 127.0.0.1 (0.6 ms a
request through one client, measured): in a poll every 50 ms while a server starts, half
a core taken from the server. httpx's Client is safe to share between threads. It
keeps no cookies: a server's Set-Cookie would otherwise reach every later test's server
on 127.0.0.1 (cookies ignore the port); tests of cookies make their own clients.
"""

from __future__ import annotations

import atexit
from http.cookiejar import CookieJar, DefaultCookiePolicy

import httpx

HTTP = httpx.Client(
    timeout=5.0,  # httpx's module functions' default
    cookies=CookieJar(DefaultCookiePolicy(allowed_domains=[])),  # keeps none
)
atexit.register(HTTP.close)
