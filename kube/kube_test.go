package kube

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDaemonLinksNoAllGroupsScheme: the daemon binary links none of the client-go packages that
// register every API group at start (typed clientsets, informer factories, discovery, leader
// election). A new import of one of them would cost every process about 10 MiB.
func TestDaemonLinksNoAllGroupsScheme(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/configbutler/gitops-reverser").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, banned := range []string{
			"k8s.io/client-go/kubernetes", "k8s.io/client-go/informers", "k8s.io/client-go/listers",
			"k8s.io/client-go/applyconfigurations", "k8s.io/client-go/discovery", "k8s.io/client-go/tools/leaderelection",
			"k8s.io/client-go/dynamic/dynamicinformer", "k8s.io/apiextensions-apiserver/pkg/client",
		} {
			if pkg == banned || strings.HasPrefix(pkg, banned+"/") {
				t.Errorf("the daemon links %s; see package kube for why it must not", pkg)
			}
		}
	}
}

// TestConvertRoundTripsASecret: bytes survive the trip through the unstructured form (base64, as
// in JSON), and the kind is set for the apiserver.
func TestConvertRoundTripsASecret(t *testing.T) {
	c := &Client[corev1.Secret]{kind: Secrets}
	in := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", ResourceVersion: "7"},
		Data: map[string][]byte{"key": {0, 1, 2, 0xff}}, Type: corev1.SecretTypeOpaque}
	u, err := c.unstructured(in)
	if err != nil {
		t.Fatal(err)
	}
	if u.GetAPIVersion() != "v1" || u.GetKind() != "Secret" || u.Object["data"].(map[string]any)["key"] != "AAEC/w==" {
		t.Fatalf("unstructured = %v", u.Object)
	}
	out, err := Convert[corev1.Secret](u)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Data["key"], in.Data["key"]) || out.Name != "s" || out.ResourceVersion != "7" || out.Type != corev1.SecretTypeOpaque {
		t.Fatalf("round trip = %+v", out)
	}
	if _, err := Convert[corev1.Secret](in); err == nil {
		t.Fatal("Convert of a typed object: want an error")
	}
}
