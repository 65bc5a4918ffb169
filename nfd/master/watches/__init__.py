"""The cluster's objects besides Nodes, each read through the core's list-then-watch
loop: NodeFeatureRules (``rulewatch``), NodeFeature objects (``nodefeatures``),
NodeFeatureGroups and their status (``groups``), the workers' pods (``podwatch``); and
the garbage collection of NodeFeature objects whose nodes are gone (``gc``)."""
