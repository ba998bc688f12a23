#!/bin/sh
# Applies the apps by hand when Flux is away.
kubectl apply -k apps/podinfo
