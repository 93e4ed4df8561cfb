"""The inference capability's component modules: ComponentResources taking plain `<Name>Args`."""
