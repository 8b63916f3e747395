// Client mode: the cases, grpc-go's client against kcsi's server (csi-testdriver). The first
// seven are those the grpc-js peer had; the rest test what grpc-go does that the other peers do
// not (its keepalive pings and their minimum of 10 s, static 64 KiB flow-control windows,
// cancellation of calls queued and running at the server, MAX_CONCURRENT_STREAMS).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
)

// The main driver: slow methods for the deadline, concurrency and connection-loss cases.
var mainFlags = []string{"--threads", "80", "--slow",
	"ControllerExpandVolume=2s,NodeGetVolumeStats=100ms,NodeStageVolume=10s"}

// A second driver whose methods fail with every code 1..16, in this order.
var failing = []string{"CreateVolume", "DeleteVolume", "ControllerPublishVolume",
	"ControllerUnpublishVolume", "ValidateVolumeCapabilities", "ListVolumes", "GetCapacity",
	"ControllerGetCapabilities", "CreateSnapshot", "DeleteSnapshot", "ListSnapshots",
	"ControllerExpandVolume", "ControllerGetVolume", "NodeStageVolume", "NodeUnstageVolume",
	"NodePublishVolume"}

func failFlags() []string {
	var s []string
	for i, m := range failing {
		s = append(s, fmt.Sprintf("%s=%d", m, i+1))
	}
	return []string{"--fail", strings.Join(s, ",")}
}

// Volume IDs that kcsi's server echoes in "volume <id> not found" (NOT_FOUND).
var awkwardIDs = []string{
	"vol-ümlaut-façade-日本語",
	"100% sure, 50%-off, %41 is not A, %zz and a lone % at the end %",
	"escapes as text: %E2%9C%93 and %41%42", // a server that did not encode '%' fails here
	"line one\nline two\r\nline three\tafter a tab",
	"emoji 🚀 and +plus+ signs, #hash, \"quotes\" 'single' \\backslash",
	" leading and trailing spaces ",
	strings.Repeat("x", 700) + " long",
}

func mountCap() *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessMode: &csi.VolumeCapability_AccessMode{
			Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{
			FsType: "xfs", MountFlags: []string{"noatime", "nodev", "ümlaut=1"}}},
	}
}

func equal(what string, got, want any) error {
	if !reflect.DeepEqual(got, want) {
		return failf("%s: got %s, want %s", what, clip(fmt.Sprintf("%v", got)),
			clip(fmt.Sprintf("%v", want)))
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

var bg = context.Background()

func timeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(bg, d)
}

const callTimeout = 10 * time.Second

// Every field kind both ways: strings (non-ASCII, which Go's protobuf checks is valid UTF-8),
// int64 at its limit, maps, repeated messages and strings, enums, oneofs, wrappers (set, unset).
func caseRoundtrip(t *harness) (string, error) {
	c := t.main
	ctx, cancel := timeout(callTimeout)
	defer cancel()
	info, err := c.id.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil {
		return "", failf("GetPluginInfo: %s", stStr(err))
	}
	probe, err := c.id.Probe(ctx, &csi.ProbeRequest{})
	if err != nil {
		return "", failf("Probe: %s", stStr(err))
	}
	pc, err := c.id.GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{})
	if err != nil {
		return "", failf("GetPluginCapabilities: %s", stStr(err))
	}
	var capTypes []string
	for _, cp := range pc.GetCapabilities() {
		if s := cp.GetService(); s != nil {
			capTypes = append(capTypes, s.GetType().String())
		} else {
			capTypes = append(capTypes, cp.GetVolumeExpansion().GetType().String())
		}
	}
	capa, err := c.ctl.GetCapacity(ctx, &csi.GetCapacityRequest{Parameters: map[string]string{"a": "b"}})
	if err != nil {
		return "", failf("GetCapacity: %s", stStr(err))
	}
	if err := firstErr(
		equal("GetPluginInfo", []any{info.GetName(), info.GetVendorVersion(), info.GetManifest()},
			[]any{"testdriver.kcsi.dev", "v0.0.1", map[string]string{"kind": "test"}}),
		equal("Probe.ready (BoolValue)", probe.GetReady() != nil && probe.GetReady().GetValue(), true),
		equal("GetPluginCapabilities (oneof)", capTypes, []string{"CONTROLLER_SERVICE",
			"VOLUME_ACCESSIBILITY_CONSTRAINTS", "GROUP_CONTROLLER_SERVICE", "ONLINE"}),
		equal("GetCapacity (int64, Int64Value set and unset)",
			[]any{capa.GetAvailableCapacity(), capa.GetMaximumVolumeSize().GetValue(),
				capa.GetMinimumVolumeSize() == nil},
			[]any{int64(107374182400), int64(10737418240), true})); err != nil {
		return "", err
	}

	params := map[string]string{"type": "fast", "ünïcode": "välue-日本", "empty": "", "with space": "a b"}
	caps := []*csi.VolumeCapability{mountCap(), {
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}}}
	req := &csi.CreateVolumeRequest{
		Name:               "pvc-ü-1",
		CapacityRange:      &csi.CapacityRange{RequiredBytes: 9223372036854775807},
		VolumeCapabilities: caps, Parameters: params, Secrets: map[string]string{"password": "s3cret"},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: "snap-ü"}}},
		AccessibilityRequirements: &csi.TopologyRequirement{Preferred: []*csi.Topology{
			{Segments: map[string]string{"zone": "z-ü", "rack": "r1"}}}},
	}
	cv, err := c.ctl.CreateVolume(ctx, req)
	if err != nil {
		return "", failf("CreateVolume: %s", stStr(err))
	}
	v := cv.GetVolume()
	var topo []map[string]string
	for _, tp := range v.GetAccessibleTopology() {
		topo = append(topo, tp.GetSegments())
	}
	if err := firstErr(
		equal("CreateVolume volume (string, int64 max, map)",
			[]any{v.GetVolumeId(), v.GetCapacityBytes(), v.GetVolumeContext()},
			[]any{"vol-pvc-ü-1", int64(9223372036854775807), params}),
		equal("CreateVolume content_source (oneof)",
			v.GetContentSource().GetSnapshot().GetSnapshotId(), "snap-ü"),
		equal("CreateVolume accessible_topology (repeated message with a map)", topo,
			[]map[string]string{{"zone": "z-ü", "rack": "r1"}})); err != nil {
		return "", err
	}
	pub, err := c.ctl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{
		VolumeId: "vol-pvc-ü-1", NodeId: "node-ü", Readonly: true, VolumeCapability: mountCap()})
	if err != nil {
		return "", failf("ControllerPublishVolume: %s", stStr(err))
	}
	vv, err := c.ctl.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{
		VolumeId: "vol-pvc-ü-1", VolumeCapabilities: caps})
	if err != nil {
		return "", failf("ValidateVolumeCapabilities: %s", stStr(err))
	}
	var confirmed []string
	for _, cp := range vv.GetConfirmed().GetVolumeCapabilities() {
		kind := "block"
		if m := cp.GetMount(); m != nil {
			kind = "mount " + strings.Join(m.GetMountFlags(), ",")
		}
		confirmed = append(confirmed, cp.GetAccessMode().GetMode().String()+" "+kind)
	}
	ni, err := c.node.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	if err != nil {
		return "", failf("NodeGetInfo: %s", stStr(err))
	}
	if err := firstErr(
		equal("ControllerPublishVolume publish_context", pub.GetPublishContext(),
			map[string]string{"devicePath": "/dev/test/vol-pvc-ü-1", "readonly": "true"}),
		equal("ValidateVolumeCapabilities (enums, oneofs, repeated strings)", confirmed,
			[]string{"MULTI_NODE_MULTI_WRITER mount noatime,nodev,ümlaut=1", "SINGLE_NODE_WRITER block"}),
		equal("NodeGetInfo", []any{ni.GetNodeId(), ni.GetMaxVolumesPerNode(),
			ni.GetAccessibleTopology().GetSegments()},
			[]any{"test-node", int64(16), map[string]string{"topology.kcsi.dev/zone": "z1"}})); err != nil {
		return "", err
	}
	if _, err := c.ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "vol-pvc-ü-1"}); err != nil {
		return "", failf("DeleteVolume: %s", stStr(err))
	}
	return "GetPluginInfo, Probe, GetPluginCapabilities, GetCapacity, CreateVolume, " +
		"ControllerPublishVolume, ValidateVolumeCapabilities, NodeGetInfo, DeleteVolume", nil
}

// grpc-timeout is sent and honoured: 200 ms against a 2 s handler.
func caseDeadline(t *harness) (string, error) {
	r := call(200*time.Millisecond, func(ctx context.Context) error {
		_, err := t.main.ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{
			VolumeId: "v", CapacityRange: &csi.CapacityRange{RequiredBytes: 1}})
		return err
	})
	if err := expectCode("ControllerExpandVolume with a 200 ms deadline", r.err,
		codes.DeadlineExceeded); err != nil {
		return "", err
	}
	if r.ms >= 1500 {
		return "", failf("DEADLINE_EXCEEDED after %d ms, want well under the handler's 2 s", r.ms)
	}
	ctx, cancel := timeout(callTimeout)
	defer cancel()
	if _, err := t.main.id.Probe(ctx, &csi.ProbeRequest{}); err != nil {
		return "", failf("Probe after the deadline: %s", stStr(err))
	}
	return fmt.Sprintf("DEADLINE_EXCEEDED after %d ms; the connection serves the next call", r.ms), nil
}

// Codes 1..16 from kcsi's server, and its messages with non-ASCII, '%', newlines.
func caseStatus(t *harness) (string, error) {
	ctx, cancel := timeout(callTimeout)
	defer cancel()
	f := t.failing
	for i, m := range failing {
		code := codes.Code(i + 1)
		var err error
		switch m {
		case "CreateVolume":
			_, err = f.ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{})
		case "DeleteVolume":
			_, err = f.ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{})
		case "ControllerPublishVolume":
			_, err = f.ctl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{})
		case "ControllerUnpublishVolume":
			_, err = f.ctl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{})
		case "ValidateVolumeCapabilities":
			_, err = f.ctl.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{})
		case "ListVolumes":
			_, err = f.ctl.ListVolumes(ctx, &csi.ListVolumesRequest{})
		case "GetCapacity":
			_, err = f.ctl.GetCapacity(ctx, &csi.GetCapacityRequest{})
		case "ControllerGetCapabilities":
			_, err = f.ctl.ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
		case "CreateSnapshot":
			_, err = f.ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{})
		case "DeleteSnapshot":
			_, err = f.ctl.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{})
		case "ListSnapshots":
			_, err = f.ctl.ListSnapshots(ctx, &csi.ListSnapshotsRequest{})
		case "ControllerExpandVolume":
			_, err = f.ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{})
		case "ControllerGetVolume":
			_, err = f.ctl.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{})
		case "NodeStageVolume":
			_, err = f.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{})
		case "NodeUnstageVolume":
			_, err = f.node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{})
		case "NodePublishVolume":
			_, err = f.node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{})
		}
		if e := expectCode(m, err, code); e != nil {
			return "", e
		}
		s := status.Convert(err)
		if e := firstErr(equal(code.String()+" message", s.Message(), "injected failure for "+m),
			equal(code.String()+" details (kcsi's server sends none)", len(s.Details()), 0)); e != nil {
			return "", e
		}
	}
	for _, id := range awkwardIDs {
		_, err := t.main.ctl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{
			VolumeId: id, NodeId: "n", VolumeCapability: mountCap()})
		if e := expectCode("ControllerPublishVolume "+clip(id), err, codes.NotFound); e != nil {
			return "", e
		}
		if e := equal("NOT_FOUND message", status.Convert(err).Message(),
			"volume "+id+" not found"); e != nil {
			return "", e
		}
	}
	return fmt.Sprintf("codes 1..16 with their messages, no details; %d messages with non-ASCII, "+
		"'%%', CR/LF, tab and a 700-byte one, intact", len(awkwardIDs)), nil
}

func createPadded(c *conn, name string, pad int) (*csi.CreateVolumeResponse, error) {
	ctx, cancel := timeout(30 * time.Second)
	defer cancel()
	req := &csi.CreateVolumeRequest{Name: name, VolumeCapabilities: []*csi.VolumeCapability{mountCap()}}
	if pad > 0 {
		req.Parameters = map[string]string{"pad": strings.Repeat("b", pad)}
	}
	return c.ctl.CreateVolume(ctx, req)
}

func probeOK(c *conn, what string) error {
	ctx, cancel := timeout(callTimeout)
	defer cancel()
	if _, err := c.id.Probe(ctx, &csi.ProbeRequest{}); err != nil {
		return failf("Probe %s: %s", what, stStr(err))
	}
	return nil
}

// ~3.9 MiB both ways; over 4 MiB each way is RESOURCE_EXHAUSTED and the connection lives. With
// grpc-go's default (dynamic) windows, its BDP pings ride along with the data.
func caseLarge(t *harness) (string, error) {
	c := t.main
	pings0 := c.wire.out.pings.Load()
	big, err := createPadded(c, "big", nearLimit-200)
	if err != nil {
		return "", failf("a 3.9 MiB request: %s", stStr(err))
	}
	if n := len(big.GetVolume().GetVolumeContext()["pad"]); n != nearLimit-200 {
		return "", failf("3.9 MiB request and its 3.9 MiB echo: the pad came back as %d bytes", n)
	}
	bdp := c.wire.out.pings.Load() - pings0
	// Two volumes with 2.1 MiB names: ListVolumes answers over 4 MiB.
	names := []string{strings.Repeat("l", 21*mib/10), strings.Repeat("m", 21*mib/10)}
	for _, n := range names {
		if _, err := createPadded(c, n, 0); err != nil {
			return "", failf("CreateVolume with a 2.1 MiB name: %s", stStr(err))
		}
	}
	ctx, cancel := timeout(30 * time.Second)
	defer cancel()
	_, err = c.ctl.ListVolumes(ctx, &csi.ListVolumesRequest{})
	if e := expectCode("ListVolumes answering 4.2 MiB", err, codes.ResourceExhausted); e != nil {
		return "", e
	}
	over := status.Convert(err).Message()
	if e := probeOK(c, "after the oversize response"); e != nil {
		return "", e
	}
	_, err = createPadded(c, "huge", overLimit)
	if e := expectCode("a 4.5 MiB request", err, codes.ResourceExhausted); e != nil {
		return "", e
	}
	huge := status.Convert(err).Message()
	if e := probeOK(c, "after the oversize request"); e != nil {
		return "", e
	}
	for _, id := range []string{"vol-big", "vol-" + names[0], "vol-" + names[1]} {
		if _, err := c.ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
			return "", failf("DeleteVolume %s: %s", clip(id), stStr(err))
		}
	}
	list, err := c.ctl.ListVolumes(ctx, &csi.ListVolumesRequest{})
	if err != nil || len(list.GetEntries()) != 0 {
		return "", failf("volumes left after the large case: %d (%v)", len(list.GetEntries()), err)
	}
	return fmt.Sprintf("3.9 MiB request and response OK (%d BDP pings acknowledged); "+
		"4.2 MiB response: %q; 4.5 MiB request: %q; the connection served the calls after each",
		bdp, clip(over), clip(huge)), nil
}

// n NodeGetVolumeStats calls at once on one connection; returns how long they took.
func concurrentStats(c *conn, n int) (int64, error) {
	start := time.Now()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ctx, cancel := timeout(30 * time.Second)
			defer cancel()
			resp, err := c.node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{
				VolumeId: fmt.Sprintf("v%d", i), VolumePath: fmt.Sprintf("/p/%d", i)})
			if err != nil {
				errs[i] = failf("call %d: %s", i, stStr(err))
				return
			}
			var usage []string
			for _, u := range resp.GetUsage() {
				usage = append(usage, fmt.Sprintf("%s %d", u.GetUnit(), u.GetTotal()))
			}
			errs[i] = equal("NodeGetVolumeStats usage", usage,
				[]string{"BYTES 1073741824", "INODES 65536"})
		}(i)
	}
	wg.Wait()
	return time.Since(start).Milliseconds(), firstErr(errs...)
}

// 64 calls in flight at once on one connection against a 100 ms handler.
func caseConcurrency(t *harness) (string, error) {
	ms, err := concurrentStats(t.main, 64)
	if err != nil {
		return "", err
	}
	if ms >= 3200 {
		return "", failf("64 calls took %d ms, want much less than 64 x 100 ms", ms)
	}
	return fmt.Sprintf("64 calls in %d ms", ms), nil
}

// The server is killed -9 while a call is in flight: the call ends UNAVAILABLE (no hang) and
// the channel leaves READY within 3 s; a server started again on the same socket is reached by the same
// ClientConn, which reconnects by itself.
func caseReconnect(t *harness) (string, error) {
	c := t.main
	done := make(chan result, 1)
	go func() {
		done <- call(20*time.Second, func(ctx context.Context) error {
			_, err := c.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "v",
				StagingTargetPath: "/st", VolumeCapability: mountCap()})
			return err
		})
	}()
	time.Sleep(300 * time.Millisecond)
	t.drivers.kill("main", 9)
	r := <-done
	if e := expectCode("the call in flight at the kill", r.err, codes.Unavailable); e != nil {
		return "", e
	}
	if r.ms >= 8000 {
		return "", failf("the call in flight ended %d ms after it started (the handler takes 10 s)", r.ms)
	}
	// The call ends when the transport reads EOF; grpc-go moves the channel out of READY a step
	// later, through its serializer, which a loaded CPU can delay (CI saw READY just after).
	state := c.cc.GetState()
	ctx, cancel := timeout(3 * time.Second)
	for state == connectivity.Ready && c.cc.WaitForStateChange(ctx, state) {
		state = c.cc.GetState()
	}
	cancel()
	// Restarted whatever happened above: the cases after this one use the same server.
	if err := t.drivers.start("main", mainFlags...); err != nil {
		return "", err
	}
	if state == connectivity.Ready {
		return "", failf("the channel still said READY 3 s after the kill")
	}
	again := call(15*time.Second, func(ctx context.Context) error {
		_, err := c.id.Probe(ctx, &csi.ProbeRequest{}, grpc.WaitForReady(true))
		return err
	})
	if again.err != nil {
		return "", failf("the same ClientConn after the restart: %s", stStr(again.err))
	}
	return fmt.Sprintf("UNAVAILABLE after %d ms (%q); channel %s; reconnected in %d ms",
		r.ms, clip(status.Convert(r.err).Message()), state, again.ms), nil
}

// grpc-go's keepalive at the settings a sidecar would use (Time 10 s, grpc-go's minimum, and
// PermitWithoutStream): over 22 idle seconds it pings twice, kcsi's server acknowledges each
// and sends no GOAWAY (no too_many_pings), the channel stays READY.
func caseKeepalive(t *harness) (string, error) {
	c, err := dial(t.drivers.endpoint("main"), grpc.WithKeepaliveParams(keepalive.ClientParameters{
		Time: upstreamKeepalive, Timeout: 5 * time.Second, PermitWithoutStream: true}))
	if err != nil {
		return "", err
	}
	defer c.close()
	r := call(callTimeout, func(ctx context.Context) error {
		_, err := c.id.Probe(ctx, &csi.ProbeRequest{}, grpc.WaitForReady(true))
		return err
	})
	if r.err != nil {
		return "", failf("Probe: %s", stStr(r.err))
	}
	pings0, acks0 := c.wire.out.pings.Load(), c.wire.in.acks.Load()
	ctx, cancel := timeout(22 * time.Second)
	defer cancel()
	var changes []string
	for s := c.cc.GetState(); c.cc.WaitForStateChange(ctx, s); {
		s = c.cc.GetState()
		changes = append(changes, s.String())
	}
	pings, acks := c.wire.out.pings.Load()-pings0, c.wire.in.acks.Load()-acks0
	goaways := c.wire.in.frames[frameGoAway].Load()
	after := probeOK(c, "after 22 idle seconds")
	why := ""
	switch {
	case goaways > 0 || len(changes) > 0:
		why = fmt.Sprintf("the connection left READY (%s) after %d GOAWAY", strings.Join(changes, " -> "), goaways)
	case pings < 2:
		why = fmt.Sprintf("grpc-go sent %d keepalive pings in 22 idle seconds, want 2", pings)
	case acks < pings:
		why = fmt.Sprintf("kcsi's server acknowledged %d of %d pings", acks, pings)
	case after != nil:
		why = after.Error()
	}
	if why != "" && t.libgrpcServer && goaways > 0 {
		return "", knownDeviation{why + ". libgrpc's server enforces gRPC's default ping policy " +
			"(GOAWAY ENHANCE_YOUR_CALM \"too_many_pings\" after 2 strikes, pings without calls " +
			"allowed every 5 min)"}
	}
	if why != "" {
		return "", failf("%s", why)
	}
	return fmt.Sprintf("READY throughout 22 idle seconds: %d PINGs sent, %d ACKed, no GOAWAY; "+
		"Probe OK", pings, acks), nil
}

// Static 64 KiB windows on grpc-go's side (stream and connection): a 3.9 MiB request into
// kcsi's windows and its 3.9 MiB echo through grpc-go's, flow-controlled by WINDOW_UPDATEs.
func caseWindow(t *harness) (string, error) {
	c, err := dial(t.drivers.endpoint("main"), grpc.WithInitialWindowSize(smallWin),
		grpc.WithInitialConnWindowSize(smallWin))
	if err != nil {
		return "", err
	}
	defer c.close()
	resp, err := createPadded(c, "window", nearLimit-200)
	if err != nil {
		return "", failf("a 3.9 MiB request with 64 KiB windows: %s", stStr(err))
	}
	if n := len(resp.GetVolume().GetVolumeContext()["pad"]); n != nearLimit-200 {
		return "", failf("the 3.9 MiB echo through 64 KiB windows came back as %d bytes", n)
	}
	ctx, cancel := timeout(callTimeout)
	defer cancel()
	if _, err := c.ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "vol-window"}); err != nil {
		return "", failf("DeleteVolume: %s", stStr(err))
	}
	sent := c.wire.out.frames[frameWindowUpdate].Load()
	// 3.9 MiB through a 64 KiB window needs at least 3.9 MiB / 64 KiB updates.
	if sent < int64(nearLimit/smallWin) {
		return "", failf("grpc-go sent %d WINDOW_UPDATEs for a 3.9 MiB response into 64 KiB "+
			"windows, want at least %d: kcsi's server did not wait for its windows", sent, nearLimit/smallWin)
	}
	if n := c.wire.out.pings.Load(); n != 0 {
		return "", failf("grpc-go sent %d BDP pings with static windows", n)
	}
	return fmt.Sprintf("3.9 MiB both ways; %s", c.wire), nil
}

// Cancellation seen by kcsi's server: a driver with one worker runs a 1.5 s call; five calls
// queued behind it are cancelled by grpc-go (RST_STREAM CANCEL): they end CANCELLED at once,
// leave kcsi's queue without running (the driver's record never shows them), and a call after
// them runs as soon as the worker is free. A running call cancelled ends CANCELLED at once too.
func caseCancel(t *harness) (string, error) {
	rec := t.drivers.path("cancel", "rec")
	if err := t.drivers.start("cancel", "--threads", "1", "--slow", "NodeStageVolume=1500ms",
		"--record", rec); err != nil {
		return "", err
	}
	defer t.drivers.kill("cancel", 15)
	c, err := dial(t.drivers.endpoint("cancel"))
	if err != nil {
		return "", err
	}
	defer c.close()
	stage := func(ctx context.Context, id string) error {
		_, err := c.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id,
			StagingTargetPath: "/st", VolumeCapability: mountCap()})
		return err
	}
	if err := probeOK(c, "of the one-worker driver"); err != nil {
		return "", err
	}
	running := make(chan result, 1)
	go func() {
		running <- call(callTimeout, func(ctx context.Context) error { return stage(ctx, "running") })
	}()
	time.Sleep(200 * time.Millisecond)
	qctx, qcancel := context.WithCancel(bg)
	queued := make(chan error, 5)
	for i := 0; i < 5; i++ {
		go func(i int) { queued <- stage(qctx, fmt.Sprintf("queued-%d", i)) }(i)
	}
	time.Sleep(300 * time.Millisecond)
	cancelAt := time.Now()
	qcancel()
	for i := 0; i < 5; i++ {
		if e := expectCode("a queued call cancelled", <-queued, codes.Canceled); e != nil {
			return "", e
		}
	}
	cancelMs := time.Since(cancelAt).Milliseconds()
	after := call(callTimeout, func(ctx context.Context) error { return stage(ctx, "after") })
	// grpc-go writes the RST_STREAMs after the calls returned; they are on the wire by now.
	if rsts := c.wire.out.frames[frameRSTStream].Load(); rsts < 5 {
		return "", failf("grpc-go sent %d RST_STREAM for 5 cancelled calls", rsts)
	}
	if r := <-running; r.err != nil {
		return "", failf("the running call: %s", stStr(r.err))
	}
	if after.err != nil {
		return "", failf("the call after the cancelled ones: %s", stStr(after.err))
	}
	// "after" waits for the rest of "running" (~1 s) and runs 1.5 s; behind five queued
	// handlers it would take 9 s.
	if after.ms > 4000 {
		return "", failf("the call after five cancelled ones took %d ms: kcsi's server ran "+
			"the cancelled calls' handlers", after.ms)
	}
	data, err := os.ReadFile(rec)
	if err != nil {
		return "", failf("the driver's record: %v", err)
	}
	if strings.Contains(string(data), "queued-") {
		return "", failf("kcsi's server ran a handler of a call cancelled in its queue: %s", clip(string(data)))
	}
	if !strings.Contains(string(data), "\"running\"") || !strings.Contains(string(data), "\"after\"") {
		return "", failf("the driver's record lacks the calls that ran: %s", clip(string(data)))
	}

	// A call cancelled while its handler runs: CANCELLED at once, the connection lives.
	rctx, rcancel := context.WithCancel(bg)
	time.AfterFunc(300*time.Millisecond, rcancel)
	start := time.Now()
	err = stage(rctx, "cancel-running")
	ms := time.Since(start).Milliseconds()
	if e := expectCode("a running call cancelled after 300 ms", err, codes.Canceled); e != nil {
		return "", e
	}
	if ms > 1000 {
		return "", failf("a running call cancelled after 300 ms ended after %d ms", ms)
	}
	if e := probeOK(c, "after the cancellations"); e != nil {
		return "", e
	}
	return fmt.Sprintf("5 queued calls CANCELLED within %d ms (RST_STREAM CANCEL), never run; "+
		"the next call done in %d ms; a running call cancelled ended in %d ms; %s", cancelMs,
		after.ms, ms, c.wire), nil
}

// Many streams on one connection: kcsi's server allows 128 at once (SETTINGS); 128 calls of a
// 1 s handler on 128 workers finish in about 1 s only if all were open at once, and 200 more
// than the limit are queued by grpc-go and all succeed.
func caseStreams(t *harness) (string, error) {
	if err := t.drivers.start("streams", "--threads", "200", "--slow", "NodeGetVolumeStats=1s"); err != nil {
		return "", err
	}
	defer t.drivers.kill("streams", 15)
	c, err := dial(t.drivers.endpoint("streams"))
	if err != nil {
		return "", err
	}
	defer c.close()
	if err := probeOK(c, "of the streams driver"); err != nil {
		return "", err
	}
	ms128, err := concurrentStats(c, 128)
	if err != nil {
		return "", err
	}
	if ms128 >= 1900 {
		return "", failf("128 calls of 1 s on one connection took %d ms: they were not all "+
			"in flight at once", ms128)
	}
	ms200, err := concurrentStats(c, 200)
	if err != nil {
		return "", err
	}
	// Two rounds under the 128-stream limit: about 2 s; one at a time would be 200 s.
	if ms200 >= 3500 {
		return "", failf("200 calls of 1 s on one connection took %d ms, want about 2 s", ms200)
	}
	return fmt.Sprintf("128 calls of 1 s in %d ms (all in flight at once); 200 calls in %d ms "+
		"(kcsi's 128-stream limit, the rest queued by grpc-go)", ms128, ms200), nil
}

var cases = []testCase{
	{"roundtrip", caseRoundtrip},
	{"deadline", caseDeadline},
	{"status", caseStatus},
	{"large", caseLarge},
	{"concurrency", caseConcurrency},
	{"reconnect", caseReconnect},
	{"keepalive", caseKeepalive},
	{"window", caseWindow},
	{"cancel", caseCancel},
	{"streams", caseStreams},
	{"server_streaming", caseServerStreaming},
}

// A server-streaming call (SnapshotMetadata, CSI v1.12), which kcsi's server answers whole when
// the handler is done: grpc-go's client reads it message by message as the external-snapshot-
// metadata sidecar would, every range in order, at most max_results per message, then io.EOF;
// an unknown snapshot is NOT_FOUND from the first Recv, and an empty answer is io.EOF at once.
func caseServerStreaming(t *harness) (string, error) {
	ctx, cancel := timeout(callTimeout)
	defer cancel()
	sm := csi.NewSnapshotMetadataClient(t.main.cc)
	read := func(id string, max int32) (msgs, ranges int, err error) {
		st, err := sm.GetMetadataAllocated(ctx, &csi.GetMetadataAllocatedRequest{
			SnapshotId: id, MaxResults: max})
		if err != nil {
			return 0, 0, err
		}
		for {
			r, err := st.Recv()
			if errors.Is(err, io.EOF) {
				return msgs, ranges, nil
			}
			if err != nil {
				return msgs, ranges, err
			}
			if max > 0 && len(r.GetBlockMetadata()) > int(max) {
				return msgs, ranges, failf("message %d: %d ranges, max_results %d", msgs,
					len(r.GetBlockMetadata()), max)
			}
			for _, b := range r.GetBlockMetadata() {
				if b.GetByteOffset() != int64(ranges)*8192 || b.GetSizeBytes() != 4096 {
					return msgs, ranges, failf("range %d: %d+%d, want %d+4096", ranges,
						b.GetByteOffset(), b.GetSizeBytes(), ranges*8192)
				}
				ranges++
			}
			msgs++
		}
	}
	msgs, ranges, err := read("ranges-1000", 64)
	if err != nil {
		return "", failf("GetMetadataAllocated: %v", err)
	}
	if err := firstErr(equal("messages", msgs, 16), equal("ranges", ranges, 1000)); err != nil {
		return "", err
	}
	if m, _, err := read("ranges-0", 0); err != nil || m != 0 {
		return "", failf("empty stream: %d messages, %v", m, err)
	}
	if _, _, err := read("no-such-snapshot", 0); status.Code(err) != codes.NotFound {
		return "", failf("unknown snapshot: %v, want NotFound", err)
	}
	return fmt.Sprintf("%d ranges in %d messages read one by one; empty and NOT_FOUND streams",
		ranges, msgs), nil
}
