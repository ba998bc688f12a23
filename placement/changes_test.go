package placement

import (
	"testing"
)

// check compares ops with want, one op a line as opsText writes them.
func check(t *testing.T, ops []Op, want string) {
	t.Helper()
	if got := opsText(ops); got != want {
		t.Errorf("ops:\n%s\nwant:\n%s", got, want)
	}
}

func TestNothingChangedIsNoOp(t *testing.T) {
	// Live carries every default, Flux's labels, the controller's annotation and status: none is
	// a person's change.
	check(t, webModel(t).changes(), "")
}

func TestSetImageChangesTheImageOnly(t *testing.T) {
	f := webModel(t)
	at(t, f.live, "spec", "template", "spec", "containers", "name=web")["image"] = "nginx:1.28"
	disown(f.live, "kustomize-controller", "f:spec", "f:template", "f:spec", "f:containers", `k:{"name":"web"}`, "f:image")
	write(t, f.live, `
- apiVersion: apps/v1
  fieldsType: FieldsV1
  fieldsV1:
    f:spec:
      f:template:
        f:spec:
          f:containers:
            k:{"name":"web"}:
              f:image: {}
  manager: kubectl-set
  operation: Update
  time: "2025-03-02T09:00:00Z"
`)
	check(t, f.changes(), "set spec.template.spec.containers[name=web].image = \"nginx:1.28\"\n")
}

// kubectl scale writes the scale subresource and names no field manager: the apiserver names it
// after the user agent, kubectl.
const scaledByKubectl = `
- apiVersion: apps/v1
  fieldsType: FieldsV1
  fieldsV1:
    f:spec:
      f:replicas: {}
  manager: kubectl
  operation: Update
  subresource: scale
  time: "2025-03-02T09:00:00Z"
`

// An HPA rescales through the scale subresource as kube-controller-manager.
const scaledByHPA = `
- apiVersion: apps/v1
  fieldsType: FieldsV1
  fieldsV1:
    f:spec:
      f:replicas: {}
  manager: kube-controller-manager
  operation: Update
  subresource: scale
  time: "2025-03-02T09:00:00Z"
`

func TestScaleByAPersonChangesReplicas(t *testing.T) {
	f := webModel(t)
	f.live["spec"].(map[string]any)["replicas"] = int64(5)
	disown(f.live, "kustomize-controller", "f:spec", "f:replicas")
	write(t, f.live, scaledByKubectl)
	check(t, f.changes(), "set spec.replicas = 5\n")
}

func TestScaleByAnHPAIsNotWrittenThoughTheFileDeclaresReplicas(t *testing.T) {
	f := webModel(t)
	f.live["spec"].(map[string]any)["replicas"] = int64(7)
	disown(f.live, "kustomize-controller", "f:spec", "f:replicas")
	write(t, f.live, scaledByHPA)
	check(t, f.changes(), "")
}

// withoutReplicas is the fixture of a file that leaves replicas to the default (1), which Flux
// then does not own.
func withoutReplicas(t *testing.T) fixtureModel {
	f := webModel(t)
	delete(f.file["spec"].(map[string]any), "replicas")
	f.baseline["spec"].(map[string]any)["replicas"] = int64(1)
	f.live["spec"].(map[string]any)["replicas"] = int64(1)
	disown(f.live, "kustomize-controller", "f:spec", "f:replicas")
	return f
}

func TestScaleByAPersonAddsReplicasTheFileLeftOut(t *testing.T) {
	f := withoutReplicas(t)
	f.live["spec"].(map[string]any)["replicas"] = int64(3)
	write(t, f.live, scaledByKubectl)
	check(t, f.changes(), "set spec.replicas = 3\n")
}

func TestScaleByAnHPAAddsNothingWhenTheFileLeftReplicasOut(t *testing.T) {
	f := withoutReplicas(t)
	f.live["spec"].(map[string]any)["replicas"] = int64(3)
	write(t, f.live, scaledByHPA)
	check(t, f.changes(), "")
}

// TestScaleOfAReplicasNobodyOwnedIsNotWritten: the apiserver records no owner when the scale
// subresource changes a replicas nobody owned (seen on a real apiserver: managedFields stay as
// Flux left them), and the admission webhook does not see subresources: it may be an HPA's.
func TestScaleOfAReplicasNobodyOwnedIsNotWritten(t *testing.T) {
	f := withoutReplicas(t)
	f.live["spec"].(map[string]any)["replicas"] = int64(4)
	check(t, f.changes(), "")
}

func TestEditAddingAnEnvVarSetsThatItem(t *testing.T) {
	f := webModel(t)
	container := at(t, f.live, "spec", "template", "spec", "containers", "name=web")
	container["env"] = append(container["env"].([]any), map[string]any{"name": "DEBUG", "value": "1"})
	write(t, f.live, `
- apiVersion: apps/v1
  fieldsType: FieldsV1
  fieldsV1:
    f:spec:
      f:template:
        f:spec:
          f:containers:
            k:{"name":"web"}:
              f:env:
                k:{"name":"DEBUG"}:
                  .: {}
                  f:name: {}
                  f:value: {}
  manager: kubectl-edit
  operation: Update
  time: "2025-03-02T09:00:00Z"
`)
	check(t, f.changes(), "set spec.template.spec.containers[name=web].env[name=DEBUG] = {\"name\":\"DEBUG\",\"value\":\"1\"}\n")
}

func TestEditRemovingAnEnvVarRemovesThatItem(t *testing.T) {
	f := webModel(t)
	container := at(t, f.live, "spec", "template", "spec", "containers", "name=web")
	container["env"] = container["env"].([]any)[1:]
	disown(f.live, "kustomize-controller", "f:spec", "f:template", "f:spec", "f:containers", `k:{"name":"web"}`, "f:env", `k:{"name":"MODE"}`)
	check(t, f.changes(), "remove spec.template.spec.containers[name=web].env[name=MODE]\n")
}

func TestLabelByAPersonIsAdded(t *testing.T) {
	f := webModel(t)
	at(t, f.live, "metadata", "labels")["team"] = "payments"
	write(t, f.live, `
- apiVersion: v1
  fieldsType: FieldsV1
  fieldsV1:
    f:metadata:
      f:labels:
        f:team: {}
  manager: kubectl-label
  operation: Update
  time: "2025-03-02T09:00:00Z"
`)
	check(t, f.changes(), "set metadata.labels.team = \"payments\"\n")
}

func TestLabelByFluxIsNotAdded(t *testing.T) {
	f := webModel(t)
	at(t, f.live, "metadata", "labels")["kustomize.toolkit.fluxcd.io/prune"] = "disabled"
	for _, e := range managedOf(f.live) {
		if entry := e.(map[string]any); entry["manager"] == "kustomize-controller" {
			labels := entry["fieldsV1"].(map[string]any)["f:metadata"].(map[string]any)["f:labels"].(map[string]any)
			labels["f:kustomize.toolkit.fluxcd.io/prune"] = map[string]any{}
		}
	}
	check(t, f.changes(), "")
}

func TestQuantitiesCompareByValue(t *testing.T) {
	// A baseline that kept the file's own forms; live as the apiserver writes them.
	f := webModel(t)
	requests := at(t, f.baseline, "spec", "template", "spec", "containers", "name=web", "resources", "requests")
	requests["cpu"], requests["memory"] = "0.5", "268435456"
	at(t, f.file, "spec", "template", "spec", "containers", "name=web", "resources", "requests")["cpu"] = "0.5"
	write(t, f.live, `
- apiVersion: apps/v1
  fieldsType: FieldsV1
  fieldsV1:
    f:spec:
      f:template:
        f:spec:
          f:containers:
            k:{"name":"web"}:
              f:resources:
                f:requests:
                  f:cpu: {}
                  f:memory: {}
  manager: kubectl-edit
  operation: Update
  time: "2025-03-02T09:00:00Z"
`)
	check(t, f.changes(), "")

	at(t, f.live, "spec", "template", "spec", "containers", "name=web", "resources", "requests")["cpu"] = "1"
	check(t, f.changes(), "set spec.template.spec.containers[name=web].resources.requests.cpu = \"1\"\n")
}

func TestIntOrStringIsNotNormalised(t *testing.T) {
	f := service(t)
	at(t, f.live, "spec", "ports", "name=http")["targetPort"] = "8080"
	check(t, f.changes(), "set spec.ports[name=http].targetPort = \"8080\"\n")
}

func TestRecreateStrategyDropsRollingUpdateWithoutTouchingTheFile(t *testing.T) {
	// kubectl edit: strategy.type Recreate, and rollingUpdate deleted as validation demands. The
	// file never declared rollingUpdate: its removal is a default's, and writes nothing.
	f := webModel(t)
	f.live["spec"].(map[string]any)["strategy"] = map[string]any{"type": "Recreate"}
	write(t, f.live, `
- apiVersion: apps/v1
  fieldsType: FieldsV1
  fieldsV1:
    f:spec:
      f:strategy:
        f:type: {}
  manager: kubectl-edit
  operation: Update
  time: "2025-03-02T09:00:00Z"
`)
	check(t, f.changes(), "set spec.strategy.type = \"Recreate\"\n")
}

func TestWithoutManagedFieldsOnlyDeclaredFieldsChange(t *testing.T) {
	// An object nothing wrote since Kubernetes 1.18 records no owners: a change to what the file
	// declares is written, an addition (by whom?) is not.
	f := webModel(t)
	delete(f.live["metadata"].(map[string]any), "managedFields")
	f.live["spec"].(map[string]any)["replicas"] = int64(4)
	at(t, f.live, "spec", "template", "spec", "containers", "name=web")["image"] = "nginx:1.28"
	at(t, f.live, "spec", "template", "spec")["priorityClassName"] = "high"
	container := at(t, f.live, "spec", "template", "spec", "containers", "name=web")
	container["env"] = container["env"].([]any)[:1]
	check(t, f.changes(), ""+
		"set spec.replicas = 4\n"+
		"remove spec.template.spec.containers[name=web].env[name=LOG_LEVEL]\n"+
		"set spec.template.spec.containers[name=web].image = \"nginx:1.28\"\n")
}

func TestNothingUnderStatusOrServerMetadata(t *testing.T) {
	f := webModel(t)
	meta := f.live["metadata"].(map[string]any)
	meta["finalizers"] = []any{"example.com/guard"}
	meta["generateName"] = "web-"
	f.live["status"].(map[string]any)["replicas"] = int64(9)
	write(t, f.live, `
- apiVersion: apps/v1
  fieldsType: FieldsV1
  fieldsV1:
    f:metadata:
      f:finalizers:
        .: {}
        v:"example.com/guard": {}
      f:generateName: {}
  manager: kubectl-patch
  operation: Update
  time: "2025-03-02T09:00:00Z"
`)
	check(t, f.changes(), "")
}

func TestEditAddingAContainerKeepsTheDefaultsTheEditOwns(t *testing.T) {
	// A limit of managedFields, written down: an Update owns the defaults of what it adds, so a
	// container added by kubectl edit comes with them.
	f := webModel(t)
	spec := at(t, f.live, "spec", "template", "spec")
	spec["containers"] = append(spec["containers"].([]any), map[string]any{
		"name": "proxy", "image": "envoy:1.31", "imagePullPolicy": "IfNotPresent", "resources": map[string]any{},
		"terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
	})
	write(t, f.live, `
- apiVersion: apps/v1
  fieldsType: FieldsV1
  fieldsV1:
    f:spec:
      f:template:
        f:spec:
          f:containers:
            k:{"name":"proxy"}:
              .: {}
              f:image: {}
              f:imagePullPolicy: {}
              f:name: {}
              f:resources: {}
              f:terminationMessagePath: {}
              f:terminationMessagePolicy: {}
  manager: kubectl-edit
  operation: Update
  time: "2025-03-02T09:00:00Z"
`)
	check(t, f.changes(), "set spec.template.spec.containers[name=proxy] = "+
		`{"image":"envoy:1.31","imagePullPolicy":"IfNotPresent","name":"proxy","resources":{},`+
		`"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"}`+"\n")
}

func TestWebhookSidecarIsNotAdded(t *testing.T) {
	// A sidecar a mutating webhook injects at a controller's write is the controller's.
	f := webModel(t)
	spec := at(t, f.live, "spec", "template", "spec")
	spec["containers"] = append(spec["containers"].([]any), map[string]any{"name": "istio-proxy", "image": "istio/proxyv2"})
	write(t, f.live, `
- apiVersion: apps/v1
  fieldsType: FieldsV1
  fieldsV1:
    f:spec:
      f:template:
        f:spec:
          f:containers:
            k:{"name":"istio-proxy"}:
              .: {}
              f:image: {}
              f:name: {}
  manager: kustomize-controller
  operation: Update
  time: "2025-03-02T09:00:00Z"
`)
	check(t, f.changes(), "")
}

func TestLargeIntegersCompareExactly(t *testing.T) {
	f := webModel(t)
	f.baseline["spec"].(map[string]any)["replicas"] = int64(1<<53 + 1)
	f.file["spec"].(map[string]any)["replicas"] = int64(1<<53 + 1)
	f.live["spec"].(map[string]any)["replicas"] = int64(1 << 53)
	disown(f.live, "kustomize-controller", "f:spec", "f:replicas")
	write(t, f.live, scaledByKubectl)
	check(t, f.changes(), "set spec.replicas = 9007199254740992\n")
}

func TestRolloutRestartIsAPersonsChange(t *testing.T) {
	// kubectl rollout restart stamps the template: a person's act, so written. Whether a team
	// wants that stamp in its file is the caller's to decide (a noise rule), not managedFields'.
	f := webModel(t)
	at(t, f.live, "spec", "template", "metadata")["annotations"] = map[string]any{"kubectl.kubernetes.io/restartedAt": "2025-03-02T09:00:00Z"}
	write(t, f.live, `
- apiVersion: apps/v1
  fieldsType: FieldsV1
  fieldsV1:
    f:spec:
      f:template:
        f:metadata:
          f:annotations:
            .: {}
            f:kubectl.kubernetes.io/restartedAt: {}
  manager: kubectl-rollout
  operation: Update
  time: "2025-03-02T09:00:00Z"
`)
	check(t, f.changes(), "set spec.template.metadata.annotations = {\"kubectl.kubernetes.io/restartedAt\":\"2025-03-02T09:00:00Z\"}\n")
}
