package placement

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/configbutler/gitops-reverser/sanitize"
)

// checkOwned compares Owned of live (sanitized) and live's owners with want (YAML).
func checkOwned(t *testing.T, live map[string]any, want string) {
	t.Helper()
	got := Owned(sanitize.Object(live), OwnersOf(managedOf(live), DefaultPerson))
	if w := object(t, want); !reflect.DeepEqual(got, w) {
		g, _ := json.MarshalIndent(got, "", "  ")
		e, _ := json.MarshalIndent(w, "", "  ")
		t.Errorf("Owned:\n%s\nwant:\n%s", g, e)
	}
}

// kubectl create deployment webModel --image=nginx:1.27 -n shop, as the cluster holds it.
const createdDeployment = `
apiVersion: apps/v1
kind: Deployment
metadata:
  annotations:
    deployment.kubernetes.io/revision: "1"
  creationTimestamp: "2025-03-01T10:00:00Z"
  generation: 1
  labels:
    app: webModel
  managedFields:
  - apiVersion: apps/v1
    fieldsType: FieldsV1
    fieldsV1:
      f:metadata:
        f:labels:
          .: {}
          f:app: {}
      f:spec:
        f:progressDeadlineSeconds: {}
        f:replicas: {}
        f:revisionHistoryLimit: {}
        f:selector: {}
        f:strategy:
          f:rollingUpdate:
            .: {}
            f:maxSurge: {}
            f:maxUnavailable: {}
          f:type: {}
        f:template:
          f:metadata:
            f:labels:
              .: {}
              f:app: {}
          f:spec:
            f:containers:
              k:{"name":"nginx"}:
                .: {}
                f:image: {}
                f:imagePullPolicy: {}
                f:name: {}
                f:resources: {}
                f:terminationMessagePath: {}
                f:terminationMessagePolicy: {}
            f:dnsPolicy: {}
            f:restartPolicy: {}
            f:schedulerName: {}
            f:securityContext: {}
            f:terminationGracePeriodSeconds: {}
    manager: kubectl-create
    operation: Update
    time: "2025-03-01T10:00:00Z"
  - apiVersion: apps/v1
    fieldsType: FieldsV1
    fieldsV1:
      f:metadata:
        f:annotations:
          .: {}
          f:deployment.kubernetes.io/revision: {}
      f:status:
        f:availableReplicas: {}
        f:observedGeneration: {}
        f:readyReplicas: {}
        f:replicas: {}
        f:updatedReplicas: {}
    manager: kube-controller-manager
    operation: Update
    subresource: status
    time: "2025-03-01T10:00:05Z"
  name: webModel
  namespace: shop
  resourceVersion: "48213"
  uid: 0b6c5a3e-3f7e-4a55-9d0e-2f1c8d1f6a10
spec:
  progressDeadlineSeconds: 600
  replicas: 1
  revisionHistoryLimit: 10
  selector:
    matchLabels:
      app: webModel
  strategy:
    rollingUpdate:
      maxSurge: 25%
      maxUnavailable: 25%
    type: RollingUpdate
  template:
    metadata:
      creationTimestamp: null
      labels:
        app: webModel
    spec:
      containers:
      - image: nginx:1.27
        imagePullPolicy: IfNotPresent
        name: nginx
        resources: {}
        terminationMessagePath: /dev/termination-log
        terminationMessagePolicy: File
      dnsPolicy: ClusterFirst
      restartPolicy: Always
      schedulerName: default-scheduler
      securityContext: {}
      terminationGracePeriodSeconds: 30
status:
  availableReplicas: 1
  observedGeneration: 1
  readyReplicas: 1
  replicas: 1
  updatedReplicas: 1
`

func TestOwnedOfAKubectlCreateKeepsTheDefaultsItOwns(t *testing.T) {
	// A create is an Update of a defaulted object: kubectl-create owns every default. Only the
	// template's creationTimestamp (null, owned by nobody) and what sanitize drops go.
	checkOwned(t, object(t, createdDeployment), `
apiVersion: apps/v1
kind: Deployment
metadata:
  labels:
    app: webModel
  name: webModel
  namespace: shop
spec:
  progressDeadlineSeconds: 600
  replicas: 1
  revisionHistoryLimit: 10
  selector:
    matchLabels:
      app: webModel
  strategy:
    rollingUpdate:
      maxSurge: 25%
      maxUnavailable: 25%
    type: RollingUpdate
  template:
    metadata:
      labels:
        app: webModel
    spec:
      containers:
      - image: nginx:1.27
        imagePullPolicy: IfNotPresent
        name: nginx
        resources: {}
        terminationMessagePath: /dev/termination-log
        terminationMessagePolicy: File
      dnsPolicy: ClusterFirst
      restartPolicy: Always
      schedulerName: default-scheduler
      securityContext: {}
      terminationGracePeriodSeconds: 30
`)
}

func TestOwnedOfAServerSideApplyIsWhatWasSent(t *testing.T) {
	// kubectl apply --server-side owns what it sent, no default; the port keeps containerPort
	// (sent) and does not gain protocol (its other key field, a default).
	live := object(t, createdDeployment)
	meta := live["metadata"].(map[string]any)
	meta["managedFields"] = managedOf(live)[1:]
	container := at(t, live, "spec", "template", "spec", "containers", "name=nginx")
	container["ports"] = []any{map[string]any{"containerPort": int64(80), "protocol": "TCP"}}
	write(t, live, `
- apiVersion: apps/v1
  fieldsType: FieldsV1
  fieldsV1:
    f:metadata:
      f:labels:
        f:app: {}
    f:spec:
      f:selector: {}
      f:template:
        f:metadata:
          f:labels:
            f:app: {}
        f:spec:
          f:containers:
            k:{"name":"nginx"}:
              .: {}
              f:image: {}
              f:name: {}
              f:ports:
                k:{"containerPort":80,"protocol":"TCP"}:
                  .: {}
                  f:containerPort: {}
  manager: kubectl
  operation: Apply
  time: "2025-03-01T10:00:00Z"
`)
	checkOwned(t, live, `
apiVersion: apps/v1
kind: Deployment
metadata:
  labels:
    app: webModel
  name: webModel
  namespace: shop
spec:
  selector:
    matchLabels:
      app: webModel
  template:
    metadata:
      labels:
        app: webModel
    spec:
      containers:
      - image: nginx:1.27
        name: nginx
        ports:
        - containerPort: 80
`)
}

// kubectl create service clusterip webModel --tcp=80:8080 -n shop, as the cluster holds it.
const createdService = `
apiVersion: v1
kind: Service
metadata:
  labels:
    app: webModel
  managedFields:
  - apiVersion: v1
    fieldsType: FieldsV1
    fieldsV1:
      f:metadata:
        f:labels:
          .: {}
          f:app: {}
      f:spec:
        f:internalTrafficPolicy: {}
        f:ports:
          .: {}
          k:{"port":80,"protocol":"TCP"}:
            .: {}
            f:name: {}
            f:port: {}
            f:protocol: {}
            f:targetPort: {}
        f:selector: {}
        f:sessionAffinity: {}
        f:type: {}
    manager: kubectl-create
    operation: Update
    time: "2025-03-01T10:00:00Z"
  name: webModel
  namespace: shop
spec:
  clusterIP: 10.96.14.7
  clusterIPs: [10.96.14.7]
  internalTrafficPolicy: Cluster
  ipFamilies: [IPv4]
  ipFamilyPolicy: SingleStack
  ports:
  - name: 80-8080
    port: 80
    protocol: TCP
    targetPort: 8080
  selector:
    app: webModel
  sessionAffinity: None
  type: ClusterIP
status:
  loadBalancer: {}
`

func TestOwnedOfAServiceLeavesWhatTheClusterAllocated(t *testing.T) {
	// kubectl create service clusterip webModel --tcp=80:8080: the create owns its defaults
	// (sessionAffinity, type, internalTrafficPolicy), not what the Service's storage set after
	// it (ipFamilies, ipFamilyPolicy; sanitize drops the cluster IPs).
	checkOwned(t, object(t, createdService), `
apiVersion: v1
kind: Service
metadata:
  labels:
    app: webModel
  name: webModel
  namespace: shop
spec:
  internalTrafficPolicy: Cluster
  ports:
  - name: 80-8080
    port: 80
    protocol: TCP
    targetPort: 8080
  selector:
    app: webModel
  sessionAffinity: None
  type: ClusterIP
`)
}

func TestOwnedWithoutManagedFieldsIsLive(t *testing.T) {
	live := sanitize.Object(object(t, createdDeployment))
	if got := Owned(live, Owners{}); !reflect.DeepEqual(got, live) {
		t.Errorf("Owned changed an object whose owners are unknown")
	}
}
