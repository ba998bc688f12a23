package placement

import "testing"

// serviceFile is a Service as a team writes it.
const serviceFile = `
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
spec:
  selector:
    app: web
  ports:
  - name: http
    port: 80
    targetPort: 8080
`

// serviceDefaults is what the apiserver adds to serviceFile (the cluster IPs, which sanitize
// drops, among them).
const serviceDefaults = `
spec:
  clusterIP: 10.96.14.7
  clusterIPs: [10.96.14.7]
  internalTrafficPolicy: Cluster
  ipFamilies: [IPv4]
  ipFamilyPolicy: SingleStack
  sessionAffinity: None
  type: ClusterIP
  ports:
  - name: http
    port: 80
    protocol: TCP
    targetPort: 8080
`

// serviceLiveExtra is the managed fields of the live Service: Flux applied it, and a person
// edited the port's targetPort since.
const serviceLiveExtra = `
metadata:
  managedFields:
  - apiVersion: v1
    fieldsType: FieldsV1
    fieldsV1:
      f:spec:
        f:ports:
          k:{"port":80,"protocol":"TCP"}:
            .: {}
            f:name: {}
            f:port: {}
        f:selector: {}
    manager: kustomize-controller
    operation: Apply
    time: "2025-03-01T10:00:00Z"
  - apiVersion: v1
    fieldsType: FieldsV1
    fieldsV1:
      f:spec:
        f:ports:
          k:{"port":80,"protocol":"TCP"}:
            f:targetPort: {}
    manager: kubectl-edit
    operation: Update
    time: "2025-03-02T09:00:00Z"
`

// service is a Service Flux applied, whose port's targetPort a person then edited (the cases
// change the value): its ports are named in the file and keyed by port and protocol in
// managedFields.
func service(t *testing.T) fixtureModel {
	t.Helper()
	return fixtureModel{
		file:     object(t, serviceFile),
		baseline: merge(object(t, serviceFile), object(t, serviceDefaults)),
		live:     merge(merge(object(t, serviceFile), object(t, serviceDefaults)), object(t, serviceLiveExtra)),
	}
}
