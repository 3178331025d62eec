"""The Docker-free local stack: `python -m local` (or `make dev`).

- `template`: reads `template.yaml` (CloudFormation tags, SAM Globals, intrinsic functions) into function specs.
- `resources`: creates the template's table, queues, bus, rules, bucket and secret in moto (server or `mock_aws`).
- `gateway`: an ASGI app that emulates the REST API (routing, Lambda authorizer, gateway responses) and invokes
  the real handlers in-process, each from a pool of independently imported instances.
- `pollers`: threads that play the event source mappings (table stream and SQS queues) with the same handlers.
- `stack`: wires it together on a moto server; `__main__` is the command line.

Nothing here runs at import time.
"""
