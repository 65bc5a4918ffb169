"""The hardware readers that the feature sources, the device inventory and the topology
updater share: NVML, accelerators' PCI functions and ids, DRM cards, huge pages."""
