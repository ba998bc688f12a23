// Package crds owns the configbutler.ai/v1alpha1 API: the Go types of its kinds, their CRDs
// (hand-written structural YAML, embedded so the binary installs exactly what it was built
// with) and the installer that applies them and waits until the apiserver serves them.
//
// There is no generated code: objects travel through the dynamic client as unstructured
// maps and are converted with ToUnstructured / FromUnstructured.
package crds

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/configbutler/gitops-reverser/kube"
)

// FieldManager is the server-side apply field manager of the installer.
const FieldManager = "gitops-reverser"

// LabelManagedBy, with the value ManagedByDaemon, marks what the daemon makes for itself (the
// keys of its Secrets, its admission policies): the mirror leaves it out, and so does restore.
const (
	LabelManagedBy  = "app.kubernetes.io/managed-by"
	ManagedByDaemon = "gitops-reverser"
)

const (
	// defaultInstallTimeout bounds Install when ctx has no deadline.
	defaultInstallTimeout   = 60 * time.Second
	establishedPollInterval = 200 * time.Millisecond
)

//go:embed yaml/*.yaml
var manifests embed.FS

// CRDs returns the embedded CustomResourceDefinitions, one per kind, ordered by file name.
// Unknown fields in the YAML are an error, so a typo cannot silently drop a schema keyword.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(manifests, "yaml/*.yaml")
	if err != nil {
		return nil, fmt.Errorf("list embedded CRDs: %w", err)
	}
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(names))
	for _, name := range names {
		data, err := manifests.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("read embedded CRD %s: %w", name, err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("parse embedded CRD %s: %w", name, err)
		}
		out = append(out, crd)
	}
	return out, nil
}

// Install server-side applies the CRDs of the given kinds, or of every kind when none is given
// (field manager FieldManager, forcing ownership), and waits until each is Established with its
// names accepted. The CRDs are handled concurrently. Applying the same CRDs again changes
// nothing, so it is safe on every start. Without a deadline on ctx it gives up after a minute.
func Install(ctx context.Context, cfg *rest.Config, log *slog.Logger, kinds ...string) error {
	return installOrWait(ctx, cfg, log, true, kinds)
}

// WaitEstablished only waits until the CRDs of the given kinds (of every kind when none is given)
// are Established, for clusters where another tool installs them (--install-crds=false).
func WaitEstablished(ctx context.Context, cfg *rest.Config, log *slog.Logger, kinds ...string) error {
	return installOrWait(ctx, cfg, log, false, kinds)
}

func installOrWait(ctx context.Context, cfg *rest.Config, log *slog.Logger, install bool, kinds []string) error {
	defs, err := CRDs()
	if err != nil {
		return err
	}
	if len(kinds) > 0 {
		defs = slices.DeleteFunc(defs, func(crd *apiextensionsv1.CustomResourceDefinition) bool {
			return !slices.Contains(kinds, crd.Spec.Names.Kind)
		})
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create CRD client: %w", err)
	}
	client := kube.For(dyn, kube.CustomResourceDefinitions, "")
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultInstallTimeout)
		defer cancel()
	}
	errs := make([]error, len(defs))
	var wg sync.WaitGroup
	for i, crd := range defs {
		wg.Go(func() {
			if install {
				var current bool
				if current, errs[i] = apply(ctx, client, crd, log); errs[i] != nil || current {
					return
				}
			}
			if errs[i] = waitEstablished(ctx, client, crd.Name); errs[i] == nil {
				log.Debug("crd established", "crd", crd.Name)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// apply server-side applies crd unless the cluster already holds it; current says it does and
// is served (Established and NamesAccepted), so there is nothing to wait for.
func apply(ctx context.Context, client *kube.Client[apiextensionsv1.CustomResourceDefinition], crd *apiextensionsv1.CustomResourceDefinition, log *slog.Logger) (current bool, err error) {
	body, err := applyBody(crd)
	if err != nil {
		return false, fmt.Errorf("encode CRD %s: %w", crd.Name, err)
	}
	// Read the current version to skip an apply that would change nothing, and to log what the
	// apply did.
	before := ""
	cur, err := client.Get(ctx, crd.Name, metav1.GetOptions{})
	switch {
	case err == nil && holds(cur, crd):
		log.Debug("crd unchanged", "crd", crd.Name)
		served, _, _ := ServedState(cur) // a name conflict is reported by the wait that follows
		return served, nil
	case err == nil:
		before = cur.ResourceVersion
	case !apierrors.IsNotFound(err):
		before = "unknown"
	}
	force := true
	got, err := client.Patch(ctx, crd.Name, types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: FieldManager, Force: &force})
	if err != nil {
		return false, fmt.Errorf("apply CRD %s: %w", crd.Name, err)
	}
	switch {
	case before == "":
		log.Info("crd created", "crd", crd.Name)
	case before != got.ResourceVersion:
		log.Info("crd updated", "crd", crd.Name)
	default:
		log.Debug("crd unchanged", "crd", crd.Name)
	}
	return false, nil
}

// holds reports whether live already says everything want declares: the spec, once the
// apiserver's defaults are filled in, and want's labels and annotations. Then there is nothing to
// apply. An apply that changes nothing writes nothing either, but the apiserver still validates
// the whole CRD for it (compiling every CEL rule of its schema), on every start of every replica;
// a CRD someone changed is applied again, as before.
func holds(live, want *apiextensionsv1.CustomResourceDefinition) bool {
	want = want.DeepCopy()
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(want)
	return equality.Semantic.DeepEqual(want.Spec, live.Spec) &&
		containsAll(live.Labels, want.Labels) && containsAll(live.Annotations, want.Annotations)
}

// containsAll reports whether every entry of sub is in m.
func containsAll(m, sub map[string]string) bool {
	for k, v := range sub {
		if got, ok := m[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// applyBody is the apply configuration of crd: only what the YAML says. Status and the
// zero creationTimestamp that the typed struct would carry are left out, so the field manager
// owns exactly the fields we declare.
func applyBody(crd *apiextensionsv1.CustomResourceDefinition) ([]byte, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	if err != nil {
		return nil, err
	}
	obj["apiVersion"] = apiextensionsv1.SchemeGroupVersion.String()
	obj["kind"] = "CustomResourceDefinition"
	delete(obj, "status")
	if meta, ok := obj["metadata"].(map[string]any); ok {
		delete(meta, "creationTimestamp")
	}
	return json.Marshal(obj)
}

// servedState reports whether crd is Established and NamesAccepted, and its conditions in words;
// a name conflict (NamesAccepted=False) is an error.
func ServedState(crd *apiextensionsv1.CustomResourceDefinition) (served bool, state string, err error) {
	established, accepted := false, false
	for _, c := range crd.Status.Conditions {
		switch c.Type {
		case apiextensionsv1.Established:
			established = c.Status == apiextensionsv1.ConditionTrue
		case apiextensionsv1.NamesAccepted:
			accepted = c.Status == apiextensionsv1.ConditionTrue
			if c.Status == apiextensionsv1.ConditionFalse {
				return false, "", fmt.Errorf("the cluster refused its names (NamesAccepted=False): %s: %s", c.Reason, c.Message)
			}
		}
	}
	return established && accepted, fmt.Sprintf("established=%t namesAccepted=%t", established, accepted), nil
}

// waitEstablished polls until the CRD is Established and NamesAccepted. A name conflict
// (NamesAccepted=False) fails at once instead of waiting for the deadline.
func waitEstablished(ctx context.Context, client *kube.Client[apiextensionsv1.CustomResourceDefinition], name string) error {
	var last string
	err := wait.PollUntilContextCancel(ctx, establishedPollInterval, true, func(ctx context.Context) (bool, error) {
		crd, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		var served bool
		served, last, err = ServedState(crd)
		return served, err
	})
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("wait for CRD %s to be established (last seen: %s): %w", name, last, err)
	}
	return fmt.Errorf("wait for CRD %s to be established: %w", name, err)
}
