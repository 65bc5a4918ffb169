"""nfd's DRA driver: the devices of :mod:`nfd.devices` published as ResourceSlices for
this node, and a kubelet DRA plugin that prepares them for allocated ResourceClaims.

Resources whose config says ``servedBy: dra`` are served here and nowhere else: the
device plugin skips them and the worker reports their names so that the master never
patches them as extended resources. Only :mod:`nfd.dra.publisher` imports the Kubernetes
client and only :mod:`nfd.dra.plugin` imports gRPC.
"""
