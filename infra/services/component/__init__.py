"""The services capability's component modules: ComponentResources taking plain `<Name>Args`."""
