"""Writing decisions to the Node objects: the publisher (``publisher``: a work queue
driving the node sync, a periodic resync, the Node watch), the JSON patches of a Node
and its status (``patches``), and removing what nfd wrote (``prune``)."""
