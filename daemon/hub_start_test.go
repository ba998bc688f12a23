package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// logRecord is one line of the daemon's JSON log, with the fields the hub's tests look at.
type logRecord struct {
	Level, Msg, Cluster, Fix string
	Err                      string `json:"err"`
	line                     string
}

// logRecords is the daemon's JSON log so far.
func logRecords(d *testenv.Daemon) []logRecord {
	var out []logRecord
	for _, line := range strings.Split(d.Output(), "\n") {
		var rec logRecord
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg != "" {
			rec.line = line
			out = append(out, rec)
		}
	}
	return out
}

// TestHubStartsWithoutWarnings: a hub whose remote cluster is reachable, readable and lets the
// hub register its webhook starts without a Warning Event: waiting for the RemoteClusters to be
// cached, or for the first probe of a cluster, is how every start goes, not a fault.
func TestHubStartsWithoutWarnings(t *testing.T) {
	f := newFleet(t, "fleet-quiet-start", "east")
	d := startDaemon(t, t.TempDir(), "--git-batch-quiet-ms", "200", "--log-format", "json")
	f.file(d, "clusters/east/shop/configmaps/first.yaml", "1")
	testenv.Eventually(t, time.Minute, "east connected, watched and its webhook registered", func() (bool, string) {
		rc := f.ready(d, "east", "Connected")
		return rc.Status.Watches == 1 && rc.Status.Attribution != crds.AttributionOff && rc.Status.Attribution != crds.AttributionFailing,
			fmt.Sprintf("%+v", rc.Status)
	}, d.FailFast())

	// The fleet's objects: its namespace's, and its ClusterWatchRule (whose Events are in default).
	for ns, ours := range map[string]func(corev1.Event) bool{
		f.ns:                    func(corev1.Event) bool { return true },
		metav1.NamespaceDefault: func(e corev1.Event) bool { return e.InvolvedObject.Name == f.ns+"-east" },
	} {
		events, err := f.hubKube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "type=" + corev1.EventTypeWarning})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events.Items {
			if ours(e) {
				t.Errorf("a passing start raised a Warning Event: %s %s/%s: %s", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
			}
		}
	}
	for _, rec := range logRecords(d) {
		if rec.Level == "WARN" || rec.Level == "ERROR" {
			t.Errorf("a passing start logged %s %q: %s", rec.Level, rec.Msg, rec.line)
		}
	}
}

// TestHubRegistrationRefusedIsToldOnce: the kubeconfig's identity of east may not register the
// hub's webhook there. The refusal is logged once, with the grant that fixes it, however often the
// registrar tries again, and the RemoteCluster's status says the same. When east is no longer
// mirrored, the hub does not ask anyone to delete by hand a webhook it never registered there.
func TestHubRegistrationRefusedIsToldOnce(t *testing.T) {
	f := newFleet(t, "fleet-webhook-refused", "east")
	ctx := context.Background()
	east := kubernetes.NewForConfigOrDie(f.remotes["east"].AdminConfig())
	if err := east.RbacV1().ClusterRoleBindings().Delete(ctx, "hub-webhook", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, t.TempDir(), "--git-batch-quiet-ms", "200", "--log-format", "json", "--log-level", "debug")
	f.file(d, "clusters/east/shop/configmaps/first.yaml", "1")
	const grant = "get, create, patch and delete on validatingwebhookconfigurations (resourceNames: gitops-reverser-hub)"
	testenv.Eventually(t, time.Minute, "east's attribution failing, saying what to grant", func() (bool, string) {
		rc := f.status("east")
		c := readyCondition(rc)
		return rc.Status.Attribution == crds.AttributionFailing && strings.Contains(c, grant), rc.Status.Attribution + ": " + c
	}, d.FailFast())
	// The registrar retries with backoff (0.5 s, 1 s, 2 s…): wait for three of its tries.
	testenv.Eventually(t, time.Minute, "three refused registrations in east", func() (bool, string) {
		n := 0
		for _, rec := range logRecords(d) {
			if rec.Cluster == f.ns+"/east" && strings.Contains(rec.Msg, "webhook registration failed") {
				n++
			}
		}
		return n >= 3, fmt.Sprintf("%d tries", n)
	}, d.FailFast())
	var told []logRecord
	for _, rec := range logRecords(d) {
		if (rec.Level == "WARN" || rec.Level == "ERROR") && strings.Contains(rec.line, "validatingwebhookconfigurations") {
			told = append(told, rec)
		}
	}
	if len(told) != 1 {
		t.Errorf("the refused registration was told %d times, want once: %v", len(told), told)
	} else if !strings.Contains(told[0].Fix, grant) || !strings.Contains(told[0].Fix, "RemoteCluster "+f.ns+"/east") {
		t.Errorf("the refused registration does not say what to grant in east: %s", told[0].line)
	}

	// East is no longer mirrored: its webhook was never registered, so there is nothing to remove by hand.
	if err := f.hubDyn.Resource(crds.GitDestinations).Namespace(f.ns).Delete(ctx, "east", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the hub letting go of east's webhook", func() (bool, string) {
		for _, rec := range logRecords(d) {
			if rec.Cluster == f.ns+"/east" && strings.Contains(rec.Msg, "no longer mirrored") {
				return true, ""
			}
		}
		return false, "not yet"
	}, d.FailFast())
	for _, rec := range logRecords(d) {
		if strings.Contains(rec.Msg, "by hand") {
			t.Errorf("the hub asks to delete by hand a webhook it never registered: %s", rec.line)
		}
	}
}

// readyCondition is the Ready condition of a RemoteCluster as "Reason: message".
func readyCondition(rc *crds.RemoteCluster) string {
	for _, c := range rc.Status.Conditions {
		if c.Type == crds.ConditionReady {
			return c.Reason + ": " + c.Message
		}
	}
	return ""
}
