"""The composition engine: registry, activation graph, generations, composition."""
