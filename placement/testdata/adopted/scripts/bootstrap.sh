#!/bin/sh
# Bootstrap Flux into the production cluster.
flux bootstrap github --owner=team --repository=fleet --path=clusters/production
