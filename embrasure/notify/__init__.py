"""Notifications (docs/notifications.md): subscriptions, the causes a projection decides
in its own transaction (``causes``), and their delivery as signed webhooks (``webhooks``,
``sender``)."""
