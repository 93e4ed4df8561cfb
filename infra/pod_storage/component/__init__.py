"""The pod_storage capability's component modules: ComponentResources taking plain `<Name>Args`."""
