"""The usb feature source: ``usb.device`` instances from ``/sys/bus/usb/devices``.

Entries with an ``idProduct`` are devices (the others are interfaces and hubs' ports).
Attributes as upstream: ``class`` (``bDeviceClass``), ``vendor`` (``idVendor``),
``device`` (``idProduct``), ``serial``; empty values are left out. A device whose class
is ``00`` declares its class per interface: it gives one instance per interface, with
that interface's ``bInterfaceClass``. Ours on top: ``address`` (the sysfs name, e.g.
``1-1.2``), ``busnum``, ``devnum``.

Labels: ``<class>_<vendor>_<device>.present`` for classes in ``deviceClassWhitelist``.
"""

from __future__ import annotations

import os

from nfd import hostfiles
from nfd.config import SourcesConfig
from nfd.features import Features, Instance, Labels
from nfd.hostroot import HostRoot
from nfd.sources.pci import device_labels, label_fields

# Attribute name -> sysfs file, in upstream's order (which is also the label order).
DEVICE_ATTRS = {"class": "bDeviceClass", "vendor": "idVendor", "device": "idProduct", "serial": "serial"}
DEFAULT_LABEL_FIELDS = ("class", "vendor", "device")


def read_device(dev_path: str) -> list[Instance]:
    inst: Instance = {}
    for name, file in DEVICE_ATTRS.items():
        value = hostfiles.attr(os.path.join(dev_path, file))
        if value:
            inst[name] = value
    inst["address"] = os.path.basename(dev_path)
    for name in ("busnum", "devnum"):
        value = hostfiles.attr(os.path.join(dev_path, name))
        if value:
            inst[name] = value
    if inst.get("class") != "00":
        return [inst]
    out = []
    for entry in hostfiles.entries(dev_path) or ():
        iface_class = hostfiles.attr(os.path.join(dev_path, entry, "bInterfaceClass"))
        if iface_class is not None:
            out.append({**inst, "class": iface_class})
    return out


class UsbSource:
    name = "usb"

    def discover(self, host: HostRoot, config: SourcesConfig) -> Features:
        f = Features()
        devices: list[Instance] = []
        for path in hostfiles.device_dirs(host.sys / "bus/usb/devices") or ():
            if os.path.exists(os.path.join(path, "idProduct")):
                devices.extend(read_device(path))
        f.instances["usb.device"] = devices
        return f

    def labels(self, features: Features, config: SourcesConfig) -> Labels:
        fields = label_fields(config.usb.device_label_fields, list(DEVICE_ATTRS), DEFAULT_LABEL_FIELDS)
        return device_labels(
            features.instances.get("usb.device", []),
            config.usb.device_class_whitelist,
            fields,
            sriov=False,
        )
