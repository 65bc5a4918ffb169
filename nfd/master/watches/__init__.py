"""What the master reads from the cluster besides Nodes, each through the core's
list-then-watch loop: NodeFeatureRules (``rulewatch``), NodeFeature objects
(``nodefeatures``), the workers' pods (``podwatch``)."""
