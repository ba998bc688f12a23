package watch

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestExpiredWatchRelistsAndFindsMissedDeletes deletes an object straight from etcd while the
// apiserver is down. When it comes back, the watch cannot resume from the old resourceVersion
// (410 Gone, the cache starts at the new revision): the watcher must re-list and find the delete
// it never saw as an event.
func TestExpiredWatchRelistsAndFindsMissedDeletes(t *testing.T) {
	e := newEnv(t)
	e.configMap("kept", map[string]string{"k": "v"})
	e.configMap("doomed", map[string]string{"k": "v"})
	e.watchRule("cms", "configmaps")
	e.startManager()
	e.waitFiles(e.cmPath("kept"), e.cmPath("doomed"))

	err := cp.RestartAPIServer(e.ctx, func() error {
		etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{cp.EtcdURL}, DialTimeout: 5 * time.Second})
		if err != nil {
			return err
		}
		defer func() { _ = etcd.Close() }()
		ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
		defer cancel()
		resp, err := etcd.Delete(ctx, fmt.Sprintf("/registry/configmaps/%s/doomed", e.ns))
		if err == nil && resp.Deleted != 1 {
			err = fmt.Errorf("deleted %d keys from etcd, want 1", resp.Deleted)
		}
		return err
	})
	if err != nil {
		t.Fatalf("restart apiserver: %v", err)
	}
	e.waitFiles(e.cmPath("kept"))
}
