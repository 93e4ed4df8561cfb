"""The fsx capability's component modules: ComponentResources taking plain `<Name>Args`."""
