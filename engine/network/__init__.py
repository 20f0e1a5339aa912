"""Zero-egress mode: which connections Ember may make, enforced in-process and recorded.

    destinations.py  a destination (host[:port]) and how to parse one
    policy.py        the setting (network.json) and the allowed destinations (+ saved servers)
    ledger.py        every attempt, allowed or refused, with its time and the feature that asked
    guard.py         the audit hook that refuses a connection before it is made
    sandbox.py       starting a child (an MCP server) without network access (Linux namespaces)

Qt-free: the front ends only show what is here (`ember doctor --network`, the status bar).
"""
