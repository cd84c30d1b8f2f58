"""Security: certificates, TLS contexts, SCRAM passwords and secrets at rest.

It sits just above ``feedkv.util``: the transports (kv, rangefeed), the SQL layer's
users, changefeed job records and the ports of the node all use it.
"""
