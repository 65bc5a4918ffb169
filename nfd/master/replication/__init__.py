"""Several replicas, one writer: leader election on a Lease (``leader``), a follower's
forwarding of workers' requests to the leader (``forward``, through ``peers``' HTTP
client) and its copy of the leader's nodes (``replica``). Each takes the few parts of the
runtime it uses as a Protocol of its own, never the runtime itself."""
