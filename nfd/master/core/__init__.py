"""The master's floor, shared by its other rooms and importing none of them: settings,
metrics, the API client (``kube``), the periodic jobs, the list-then-watch loop, the
node store (``state``) and its content-addressed features (``featurestore``), a
request body read within a bound (``bodylimit``)."""
