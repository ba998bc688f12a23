package writeback

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/testenv"
)

// The team's folder the adopted tests start from: podinfo's Deployment, Service and ConfigMap in
// one file without namespaces, a kustomization that gives them the test's namespace, a README
// and a Helm values file.
const (
	podinfoPath   = "apps/podinfo/podinfo.yaml"
	podinfoKust   = "apps/podinfo/kustomization.yaml"
	podinfoDeploy = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: podinfo # the team's comment
spec:
  selector:
    matchLabels:
      app: podinfo
  template:
    metadata:
      labels:
        app: podinfo
    spec:
      containers:
      - name: podinfo
        image: ghcr.io/stefanprodan/podinfo:6.5.0
        ports:
        - containerPort: 9898
`
	podinfoService = `apiVersion: v1
kind: Service
metadata:
  name: podinfo
spec:
  selector:
    app: podinfo
  ports:
  - port: 9898
    targetPort: 9898
`
	podinfoConfig = `apiVersion: v1
kind: ConfigMap
metadata:
  name: podinfo
data:
  color: blue
`
)

// podinfoFile is the team's multi-document file of the documents docs.
func podinfoFile(docs ...string) string { return "---\n" + strings.Join(docs, "---\n") }

var (
	deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	services    = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	configMaps  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// adoptedEnv is a write-back destination with spec.layout Existing on the folder apps, whose
// rules select Deployments, Services and ConfigMaps in the test's namespace, written back as the
// ServiceAccount writer of that namespace; carol approves.
type adoptedEnv struct {
	*runsEnv
	pool *gitops.Pool
}

// newAdoptedEnv sets the team's folder and its live objects up, with writer's Role holding
// rules, and starts the controller once the first run took the folder as its baseline.
func newAdoptedEnv(t *testing.T, autoApply bool, rules []rbacv1.PolicyRule) *adoptedEnv {
	t.Helper()
	r := &runsEnv{wbEnv: newWBEnv(t, &crds.WriteBack{Enabled: true, AutoApply: autoApply}), clock: testenv.NewClock(time.Now())}
	e := &adoptedEnv{runsEnv: r}
	e.patch(crds.GitDestinations, e.ns, "dest", `{"spec":{"layout":"Existing","baseFolder":"apps"}}`)
	e.bind("writer", "system:serviceaccount:"+e.ns+":writer", rules)
	e.bind("carol", "carol", []rbacv1.PolicyRule{{APIGroups: []string{"", "apps"}, Resources: []string{"configmaps", "services", "deployments"},
		Verbs: []string{"get", "create", "patch", "delete"}}})
	for _, doc := range []string{podinfoDeploy, podinfoService, podinfoConfig} {
		e.createDoc(e.ns, doc)
	}
	base := r.push(true, map[string]string{
		podinfoPath:                podinfoFile(podinfoDeploy, podinfoService, podinfoConfig),
		podinfoKust:                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: " + e.ns + "\nresources:\n- podinfo.yaml\n",
		"apps/README.md":           "# podinfo\n",
		"apps/podinfo/values.yaml": "replicaCount: 1\nimage:\n  tag: 6.5.0\n",
	})
	e.startController(base, func(writer []Writer) []Selection {
		return []Selection{
			{GVR: deployments, Kind: "Deployment", Namespaced: true, Namespace: e.ns, Writers: writer},
			{GVR: services, Kind: "Service", Namespaced: true, Namespace: e.ns, Writers: writer},
			{GVR: configMaps, Kind: "ConfigMap", Namespaced: true, Namespace: e.ns, Writers: writer},
		}
	})
	return e
}

// startController starts the Git pool on the test's repository and the controller, its rules'
// selections those selections gives for the writer ServiceAccount, and waits for its first run
// to take base as its baseline; carol approves.
func (e *adoptedEnv) startController(base string, selections func(writer []Writer) []Selection) {
	r := e.runsEnv
	e.pool = r.startPool()
	e.pool.SetRepositories([]gitops.Repository{{Name: r.ns + "/repo", URL: r.git.RepoURL("repo"),
		Credentials: gitops.Credentials{Auth: &githttp.BasicAuth{Username: r.git.Username, Password: r.git.Password}, Key: "test"}}})
	e.pool.SetWorkers([]gitops.Branch{{Repo: r.ns + "/repo", Branch: "main"}})
	sels := selections([]Writer{{Rule: "WatchRule " + e.ns + "/apps", ServiceAccount: crds.ServiceAccountReference{Namespace: e.ns, Name: "writer"}}})
	cfg := Config{Kube: cp.AdminConfig(), Git: e.pool, Ours: isOurs, Interval: time.Hour, Log: slog.New(slog.DiscardHandler),
		Selections: func(string) []Selection { return sels },
		Approvers: func(types.UID, string) (authenticationv1.UserInfo, bool) {
			return authenticationv1.UserInfo{Username: "carol", Groups: testenv.Users["carol"]}, true
		}}
	r.c = r.start(cfg, func(c *Controller) { c.clock = r.clock.Now })
	r.waitRevision(base)
}

// patch merge-patches an object as the admin.
func (e *adoptedEnv) patch(gvr schema.GroupVersionResource, ns, name, body string) {
	e.t.Helper()
	if _, err := e.dyn.Resource(gvr).Namespace(ns).Patch(context.Background(), name, types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
		e.t.Fatalf("patch %s %s/%s: %v", gvr.Resource, ns, name, err)
	}
}

// bind gives user a Role in the test's namespace with rules (a ServiceAccount user is created
// first), and waits until the authorizer counts it.
func (e *adoptedEnv) bind(name, user string, rules []rbacv1.PolicyRule) {
	e.t.Helper()
	ctx := context.Background()
	subject := rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}
	if sa, ok := strings.CutPrefix(user, "system:serviceaccount:"+e.ns+":"); ok {
		subject = rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: e.ns}
		if _, err := e.kube.CoreV1().ServiceAccounts(e.ns).Get(ctx, sa, metav1.GetOptions{}); err != nil {
			if _, err := e.kube.CoreV1().ServiceAccounts(e.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
				e.t.Fatal(err)
			}
		}
	}
	if _, err := e.kube.RbacV1().Roles(e.ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.kube.RbacV1().RoleBindings(e.ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}, Subjects: []rbacv1.Subject{subject}}, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	for _, r := range rules {
		e.allowed(user, r.Verbs[len(r.Verbs)-1], r.APIGroups[len(r.APIGroups)-1], r.Resources[len(r.Resources)-1])
	}
}

// allowed waits until the authorizer lets user verb resource (of group) in the test's namespace.
func (e *adoptedEnv) allowed(user, verb, group, resource string) {
	e.t.Helper()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: testenv.Users[user],
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: e.ns, Verb: verb, Group: group, Resource: resource}}}
	if strings.HasPrefix(user, "system:serviceaccount:") {
		review.Spec.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + e.ns}
	}
	testenv.Eventually(e.t, converge, user+" may "+verb+" "+resource, func() (bool, string) {
		got, err := e.kube.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), review, metav1.CreateOptions{})
		return err == nil && got.Status.Allowed, fmt.Sprint(err)
	})
}

// createDoc creates the object of a YAML document in namespace ns, as the admin.
func (e *adoptedEnv) createDoc(ns, doc string) {
	e.t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		e.t.Fatal(err)
	}
	gvr := map[string]schema.GroupVersionResource{"Deployment": deployments, "Service": services, "ConfigMap": configMaps}[u.GetKind()]
	if _, err := e.dyn.Resource(gvr).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{FieldManager: "kubectl"}); err != nil {
		e.t.Fatalf("create %s %s/%s: %v", u.GetKind(), ns, u.GetName(), err)
	}
}

// live reads an object of the cluster; nil when it does not exist.
func (e *adoptedEnv) live(gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	e.t.Helper()
	u, err := e.dyn.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return u
}

// proposals lists the destination's proposals by the kind of their target, and all of them.
func (e *adoptedEnv) proposals() (byKind map[string]*crds.Proposal, all []*crds.Proposal) {
	e.t.Helper()
	list, err := e.dyn.Resource(crds.Proposals).Namespace(e.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	byKind = map[string]*crds.Proposal{}
	for i := range list.Items {
		p, err := crds.FromUnstructured[crds.Proposal](&list.Items[i])
		if err != nil {
			e.t.Fatal(err)
		}
		byKind[p.Spec.Target.Kind] = p
		all = append(all, p)
	}
	return byKind, all
}

// approve sets a proposal's decision to Approve, as a reviewer would.
func (e *adoptedEnv) approve(p *crds.Proposal) {
	e.t.Helper()
	e.patch(crds.Proposals, e.ns, p.Name, `{"spec":{"decision":"Approve"}}`)
}

// waitProposal waits until the proposal named name is as ok wants it, and returns it.
func (e *adoptedEnv) waitProposal(name, what string, ok func(*crds.Proposal) bool) *crds.Proposal {
	e.t.Helper()
	var p *crds.Proposal
	testenv.Eventually(e.t, converge, what, func() (bool, string) {
		u, err := e.dyn.Resource(crds.Proposals).Namespace(e.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if p, err = crds.FromUnstructured[crds.Proposal](u); err != nil {
			return false, err.Error()
		}
		return ok(p), fmt.Sprintf("phase %s: %s", p.Status.Phase, p.Status.Message)
	})
	return p
}

// appliedReason is the reason of a proposal's Applied condition; "" when it has none.
func appliedReason(p *crds.Proposal) string {
	if c := meta.FindStatusCondition(p.Status.Conditions, crds.ConditionApplied); c != nil {
		return c.Reason
	}
	return ""
}

// lastRun is the destination's newest SyncRun.
func (e *adoptedEnv) lastRun() *crds.SyncRun {
	e.t.Helper()
	runs := e.runs()
	return runs[len(runs)-1]
}

// managedBy says whether the object's managedFields name manager.
func managedBy(u *unstructured.Unstructured, manager string) bool {
	return slices.ContainsFunc(u.GetManagedFields(), func(f metav1.ManagedFieldsEntry) bool { return f.Manager == manager })
}
