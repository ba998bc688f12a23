package daemon

import (
	"bytes"
	"context"
	"crypto/sha1" //nolint:gosec // a made-up uid, not security
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/configbutler/gitops-reverser/testenv"
)

// The scale benchmarks write their ConfigMaps straight into etcd, the way the apiserver stores
// them (protobuf): on two cores the apiserver creates about 700 a second, so seeding 100,000
// through it took most of the scale table's time. Its watch cache takes the writes in as events,
// so the daemon lists and watches them as any others. The objects carry the managedFields a
// client's create leaves, so a list costs the daemon what it would. The apiserver would read JSON
// from etcd too, but decoding it was a third of its CPU at 4,000 updates a second, which no
// cluster pays: that CPU came out of what the daemon had on the same two cores.

// etcdTxnOps is the number of puts in one transaction (etcd's default limit is 128).
const etcdTxnOps = 100

// benchCreated is the time stamped into the objects written to etcd.
var benchCreated = time.Now().UTC().Format(time.RFC3339)

// etcdClient connects to the etcd of the control plane lent to tb; it is closed when the
// benchmark ends.
func etcdClient(tb testing.TB) *clientv3.Client {
	tb.Helper()
	return etcdClientOf(tb, planes.Of(tb))
}

// etcdClientOf connects to the etcd of control plane cp (a remote cluster's, say); it is closed
// when the benchmark ends.
func etcdClientOf(tb testing.TB, cp *testenv.ControlPlane) *clientv3.Client {
	tb.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{cp.EtcdURL}, DialTimeout: 5 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cli.Close() })
	return cli
}

// configMapObject is ConfigMap name of namespace ns with payload round of object i, as a client
// would have created it.
func configMapObject(ns, name string, i, round int) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": ns, "uid": benchUID(ns, name), "creationTimestamp": benchCreated,
			"managedFields": []any{map[string]any{"manager": "daemon.test", "operation": "Update", "apiVersion": "v1", "time": benchCreated,
				"fieldsType": "FieldsV1", "fieldsV1": map[string]any{"f:data": map[string]any{".": map[string]any{}, "f:payload": map[string]any{}}}}}},
		"data": payload(i, round)}
}

// benchUID is a UUID-shaped uid that stays the same across the object's updates.
func benchUID(ns, name string) string {
	h := sha1.Sum([]byte(ns + "/" + name)) //nolint:gosec // see the import
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// etcdKey is where the apiserver keeps ConfigMap name of namespace ns.
func etcdKey(ns, name string) string { return "/registry/configmaps/" + ns + "/" + name }

// seed writes ConfigMaps cm-<i> for i in [from, to) into etcd, in transactions on benchWriters
// goroutines, and records what Git must hold.
func (m *mirrorBench) seed(etcd *clientv3.Client, from, to int) { m.seedWith(etcd, from, to, m.putOp) }

// putFunc makes the write of object i's payload round, and gives the path and blob hash that it
// makes Git's target (mirrorBench.putOp is one).
type putFunc func(i, round int) (put clientv3.Op, path, hash string, err error)

// seedWith is seed with the writes and targets that put makes: those of another cluster's etcd,
// say, whose objects land in a folder of their own.
func (m *mirrorBench) seedWith(etcd *clientv3.Client, from, to int, put putFunc) {
	txns := (to - from + etcdTxnOps - 1) / etcdTxnOps
	m.parallel(0, txns, func(ctx context.Context, k int) error {
		start := from + k*etcdTxnOps
		ops := make([]clientv3.Op, 0, etcdTxnOps)
		var targets [][2]string
		for i := start; i < min(start+etcdTxnOps, to); i++ {
			op, path, hash, err := put(i, 0)
			if err != nil {
				return err
			}
			ops, targets = append(ops, op), append(targets, [2]string{path, hash})
		}
		if _, err := etcd.Txn(ctx).Then(ops...).Commit(); err != nil {
			return fmt.Errorf("seed etcd: %w", err)
		}
		for _, t := range targets {
			m.record(t[0], t[1])
		}
		return nil
	})
}

// putOp is the write of object i's payload round, and the path and blob hash that it makes Git's
// target.
func (m *mirrorBench) putOp(i, round int) (put clientv3.Op, path, hash string, err error) {
	name := fmt.Sprintf("cm-%05d", i)
	obj := configMapObject(m.ns, name, i, round)
	var typed corev1.ConfigMap
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &typed); err != nil {
		return clientv3.Op{}, "", "", fmt.Errorf("convert %s: %w", name, err)
	}
	var data bytes.Buffer
	if err := storageEncoding.Encode(&typed, &data); err != nil {
		return clientv3.Op{}, "", "", fmt.Errorf("encode %s: %w", name, err)
	}
	path, hash = m.target(name, obj)
	return clientv3.OpPut(etcdKey(m.ns, name), data.String()), path, hash, nil
}

// storageEncoding is how the apiserver stores a ConfigMap in etcd: protobuf, with its kind
// (runtime.Unknown after the "k8s\x00" prefix).
var storageEncoding = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
