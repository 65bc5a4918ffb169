"""What each node gets: the decider (``decide``: ``nfd.decision.decide`` with the
master's sources, config and policy, its decisions cached per what they read) and the
service (``service``: takes workers' and NodeFeature objects' features, keeps the nodes'
decisions current when rules change, hands changed nodes to the publisher)."""
