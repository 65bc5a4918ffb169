"""The one device inventory: what devices this node has, for every way nfd serves them.

The device-plugin config's resources select devices by kind (:mod:`nfd.devices.kinds`);
:mod:`nfd.devices.inventory` finds them, keeps their health, and composes what a container
gets (device nodes, mounts, env, CDI edits). The device plugin (:mod:`nfd.deviceplugin`)
and the DRA driver (:mod:`nfd.dra`) both serve from this one view, so a device is
described once and served once. Nothing here imports gRPC or the Kubernetes client.
"""
