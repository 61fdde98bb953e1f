-- wrk script for bench/ingest.py: POSTs unique OpenLineage RunEvents and counts statuses.
--
-- Usage: wrk ... -s bench/ingest.lua URL -- TEMPLATE_FILE EVENTS_PER_BODY SEED
--   TEMPLATE_FILE    one compact event with the marker @@U@@ in its runId and in one
--                    dataset name; each event gets a 12-hex-digit counter there, so every
--                    event (and so every body) is distinct and hashes differently, and a
--                    deduplicating server never answers from its idempotency table.
--   EVENTS_PER_BODY  1: the body is the event (single route); N > 1: a JSON array of N
--                    distinct events (batch route).
--   SEED             0-15, distinct per wrk run against one server (warm-up vs measured).
--
-- The counter is seed (4 bits) | wrk thread (4 bits) | sequence (40 bits), formatted as two
-- %x fields because LuaJIT's %x is not exact past 32 bits. bench/ingest.py renders the
-- same bodies in Python for the parse ceiling.
--
-- done() prints one line "WRK_RESULT {json}" with the statuses seen by response(), so a
-- run that answered 400s or 503s is never reported as throughput.

local MARK = "@@U@@"
local threads = {}

function setup(thread)
   thread:set("thread_index", #threads)
   table.insert(threads, thread)
end

local parts, per_body, hi_base, seq
-- Globals, not locals: done() reads them from each thread with thread:get().
statuses, samples = {}, {}

function init(args)
   local file = assert(io.open(args[1], "rb"))
   local template = file:read("*a")
   file:close()
   parts = {}
   local start = 1
   while true do
      local i, j = string.find(template, MARK, start, true)
      if not i then break end
      table.insert(parts, string.sub(template, start, i - 1))
      start = j + 1
   end
   table.insert(parts, string.sub(template, start))
   per_body = tonumber(args[2])
   -- High 16 bits of the 48-bit counter: seed and thread; the low 32 come from seq.
   hi_base = tonumber(args[3]) * 4096 + thread_index * 256
   seq = 0
   wrk.headers["Content-Type"] = "application/json"
end

local function next_event()
   seq = seq + 1
   local id = string.format("%04x%08x", hi_base + math.floor(seq / 4294967296), seq % 4294967296)
   local out = {}
   for k = 1, #parts - 1 do
      out[2 * k - 1] = parts[k]
      out[2 * k] = id
   end
   out[2 * #parts - 1] = parts[#parts]
   return table.concat(out)
end

function request()
   local body
   if per_body == 1 then
      body = next_event()
   else
      local events = {}
      for k = 1, per_body do
         events[k] = next_event()
      end
      body = "[" .. table.concat(events, ",") .. "]"
   end
   return wrk.format("POST", nil, nil, body)
end

function response(status, headers, body)
   statuses[status] = (statuses[status] or 0) + 1
   -- A few receipts per thread, so the harness can look the deliveries up afterwards.
   if status == 202 and #samples < 3 then
      local id = string.match(body, '"delivery_id":"([0-9A-Z]+)"')
      if id then table.insert(samples, id) end
   end
end

local function json_counts(counts)
   local out = {}
   for status, n in pairs(counts) do
      table.insert(out, string.format('"%d":%d', status, n))
   end
   return "{" .. table.concat(out, ",") .. "}"
end

function done(summary, latency, requests)
   local merged, ids = {}, {}
   for _, thread in ipairs(threads) do
      for status, n in pairs(thread:get("statuses")) do
         merged[status] = (merged[status] or 0) + n
      end
      for _, id in ipairs(thread:get("samples")) do
         table.insert(ids, '"' .. id .. '"')
      end
   end
   local e = summary.errors
   io.write(string.format(
      'WRK_RESULT {"duration_us":%d,"requests":%d,"bytes":%d,'
         .. '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},'
         .. '"latency_us":{"p50":%d,"p90":%d,"p99":%d,"max":%d,"mean":%.1f},'
         .. '"statuses":%s,"sample_ids":[%s]}\n',
      summary.duration, summary.requests, summary.bytes,
      e.connect, e.read, e.write, e.status, e.timeout,
      latency:percentile(50), latency:percentile(90), latency:percentile(99),
      latency.max, latency.mean,
      json_counts(merged), table.concat(ids, ",")))
end
