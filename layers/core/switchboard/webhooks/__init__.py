"""Webhooks (Standard Webhooks): endpoints and their secrets, the event catalogue, fan-out of domain events into
one delivery per subscribed endpoint, signed delivery with retries, attempts, alerting and portal access.

    catalogue.py   the published event types
    models.py      resources and request bodies of the API
    repository.py  items and keys (WHEP#, WHSET#, WHPORTAL#; DeliveriesTable: deliveries, attempts, event payloads),
                   lists merged over their shards
    pace.py        per-organization pacing of deliveries (fairness between tenants)
    service.py     the management API's rules
    fanout.py      domain event → deliveries (webhook_fanout): payload once, batch writes, paced
    delivery.py    one delivery attempt: sign, POST, record, reschedule (webhook_sender)
    schedule.py    the retry schedule (pure)
    signing.py     secrets and signatures (pure)
    (switchboard/netguard.py decides which URLs and addresses may be called, for providers too)
"""
