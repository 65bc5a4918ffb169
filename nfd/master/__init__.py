"""``nfd master``: receives workers' raw features, decides labels, annotations, taints
and extended resources, and writes them to the Node objects through the API server."""
