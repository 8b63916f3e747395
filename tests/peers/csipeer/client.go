// Client mode: the harness. It starts csi-testdriver processes (kcsi's server) in --dir, dials
// them with grpc-go, runs the cases of cases.go and reports one line per case.
//
// Every connection goes through a frameConn, which reads the HTTP/2 frame headers passing in
// both directions (without touching the bytes): the keepalive and flow-control cases assert on
// what was on the wire (PINGs sent and acknowledged, GOAWAYs, WINDOW_UPDATEs), not only on
// what grpc-go reports.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// ---- HTTP/2 frames on the wire ----

const (
	frameData         = 0
	frameRSTStream    = 3
	framePing         = 6
	frameGoAway       = 7
	frameWindowUpdate = 8
)

// wireCount counts frames by type in one direction; the counters are atomic.
type wireCount struct {
	frames [10]atomic.Int64
	pings  atomic.Int64 // PING without ACK
	acks   atomic.Int64 // PING with ACK
}

// frameParser follows a byte stream of HTTP/2 frames (after the client preface, if any).
type frameParser struct {
	skipPreface int // bytes of the connection preface still to skip
	hdr         [9]byte
	nhdr        int
	payload     int // bytes of the current frame's payload still to skip
	count       *wireCount
}

func (f *frameParser) feed(b []byte) {
	for len(b) > 0 {
		switch {
		case f.skipPreface > 0:
			n := min(f.skipPreface, len(b))
			f.skipPreface -= n
			b = b[n:]
		case f.payload > 0:
			n := min(f.payload, len(b))
			f.payload -= n
			b = b[n:]
		default:
			n := copy(f.hdr[f.nhdr:], b)
			f.nhdr += n
			b = b[n:]
			if f.nhdr < 9 {
				return
			}
			f.nhdr = 0
			f.payload = int(f.hdr[0])<<16 | int(f.hdr[1])<<8 | int(f.hdr[2])
			t, flags := f.hdr[3], f.hdr[4]
			if int(t) < len(f.count.frames) {
				f.count.frames[t].Add(1)
			}
			if t == framePing && flags&1 == 0 {
				f.count.pings.Add(1)
			} else if t == framePing {
				f.count.acks.Add(1)
			}
		}
	}
}

// wireStats: what a connection sent (out) and received (in).
type wireStats struct{ out, in wireCount }

func (w *wireStats) String() string {
	return fmt.Sprintf("sent %d PING, %d PING ack, %d WINDOW_UPDATE, %d RST_STREAM; "+
		"received %d PING, %d PING ack, %d WINDOW_UPDATE, %d GOAWAY",
		w.out.pings.Load(), w.out.acks.Load(), w.out.frames[frameWindowUpdate].Load(),
		w.out.frames[frameRSTStream].Load(), w.in.pings.Load(), w.in.acks.Load(),
		w.in.frames[frameWindowUpdate].Load(), w.in.frames[frameGoAway].Load())
}

type frameConn struct {
	net.Conn
	out, in frameParser
	// Read and Write run on different goroutines; each direction's parser has its own lock.
	writeMu, readMu sync.Mutex
}

func (c *frameConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.writeMu.Lock()
	c.out.feed(b[:n])
	c.writeMu.Unlock()
	return n, err
}

func (c *frameConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.readMu.Lock()
	c.in.feed(b[:n])
	c.readMu.Unlock()
	return n, err
}

// ---- connections to kcsi's server ----

type conn struct {
	cc   *grpc.ClientConn
	id   csi.IdentityClient
	ctl  csi.ControllerClient
	node csi.NodeClient
	wire *wireStats // frames of every transport the channel dialled, summed
}

// dial: one grpc-go channel (one connection) for the three services, as a sidecar uses one.
func dial(endpoint string, extra ...grpc.DialOption) (*conn, error) {
	path := strings.TrimPrefix(endpoint, "unix://")
	c := &conn{wire: &wireStats{}}
	dialer := func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "unix", path)
		if err != nil {
			return nil, err
		}
		return &frameConn{Conn: nc, out: frameParser{skipPreface: 24, count: &c.wire.out},
			in: frameParser{count: &c.wire.in}}, nil
	}
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dialer),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(limit)),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{
			BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2,
			MaxDelay: time.Second}, MinConnectTimeout: 5 * time.Second}),
	}, extra...)
	cc, err := grpc.NewClient(endpoint, opts...)
	if err != nil {
		return nil, err
	}
	c.cc, c.id, c.ctl, c.node = cc, csi.NewIdentityClient(cc), csi.NewControllerClient(cc),
		csi.NewNodeClient(cc)
	return c, nil
}

func (c *conn) close() { c.cc.Close() }

// ---- csi-testdriver processes ----

type drivers struct {
	bin, dir string
	procs    map[string]*exec.Cmd
	exited   map[string]chan struct{}
}

func (d *drivers) path(name, ext string) string { return filepath.Join(d.dir, name+"."+ext) }
func (d *drivers) endpoint(name string) string  { return "unix://" + d.path(name, "sock") }

func isSocket(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode()&os.ModeSocket != 0
}

func (d *drivers) start(name string, flags ...string) error {
	log, err := os.OpenFile(d.path(name, "log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	sock := d.path(name, "sock")
	cmd := exec.Command(d.bin, append([]string{"--endpoint", d.endpoint(name)}, flags...)...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("csi-testdriver %s: %v", name, err)
	}
	os.WriteFile(d.path(name, "pid"), []byte(fmt.Sprintf("%d\n", cmd.Process.Pid)), 0o644)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	d.procs[name], d.exited[name] = cmd, done
	for i := 0; i < 200; i++ {
		if isSocket(sock) {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("csi-testdriver %s exited at start (see %s.log)", name, name)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("csi-testdriver %s did not create its socket within 10 s (see %s.log)",
		name, name)
}

func (d *drivers) kill(name string, sig syscall.Signal) {
	cmd := d.procs[name]
	if cmd == nil {
		return
	}
	select {
	case <-d.exited[name]:
		return
	default:
	}
	cmd.Process.Signal(sig)
	select {
	case <-d.exited[name]:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-d.exited[name]
	}
}

func (d *drivers) killAll() {
	for name := range d.procs {
		d.kill(name, syscall.SIGKILL)
	}
}

// ---- cases ----

// A case returns an error to fail, or a knownDeviation: a deviation named with its reason.
type knownDeviation struct{ msg string }

func (k knownDeviation) Error() string { return k.msg }

func failf(format string, a ...any) error { return fmt.Errorf(format, a...) }

type harness struct {
	drivers       *drivers
	main, failing *conn
	libgrpcServer bool
}

type testCase struct {
	name string
	fn   func(t *harness) (string, error)
}

func caseNames() []string {
	var names []string
	for _, c := range cases {
		names = append(names, c.name)
	}
	return names
}

// One unary call's outcome.
type result struct {
	err error
	ms  int64
}

// call runs fn with a deadline of timeout and reports how long it took.
func call(timeout time.Duration, fn func(ctx context.Context) error) result {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	err := fn(ctx)
	return result{err, time.Since(start).Milliseconds()}
}

func stStr(err error) string {
	s := status.Convert(err)
	return fmt.Sprintf("%s %q", s.Code(), clip(s.Message()))
}

func clip(s string) string {
	if len(s) > 200 {
		return fmt.Sprintf("%s... (%d bytes)", s[:200], len(s))
	}
	return s
}

// expectCode checks that err carries want.
func expectCode(what string, err error, want codes.Code) error {
	if err == nil {
		return failf("%s: OK, want %s", what, want)
	}
	if status.Code(err) != want {
		return failf("%s: %s, want %s", what, stStr(err), want)
	}
	return nil
}

// waitState waits up to d for the channel to reach want; it reports the states it passed.
func waitState(cc *grpc.ClientConn, want connectivity.State, d time.Duration) (bool, []string) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var seen []string
	for {
		s := cc.GetState()
		seen = append(seen, s.String())
		if s == want {
			return true, seen
		}
		if !cc.WaitForStateChange(ctx, s) {
			return false, seen
		}
	}
}

func runClient(o options, names []string) int {
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "csipeer: %v\n", err)
		return 1
	}
	d := &drivers{bin: o.testdriver, dir: o.dir, procs: map[string]*exec.Cmd{},
		exited: map[string]chan struct{}{}}
	defer d.killAll()
	todo := names
	if len(todo) == 0 {
		todo = caseNames()
	}
	byName := map[string]testCase{}
	for _, c := range cases {
		byName[c.name] = c
	}
	for _, n := range todo {
		if _, ok := byName[n]; !ok {
			fmt.Printf("FAIL %s: no such case (cases: %s)\n", n, strings.Join(caseNames(), ", "))
			fmt.Println("0 passed, 1 failed")
			return 1
		}
	}
	t := &harness{drivers: d, libgrpcServer: o.libgrpcServer}
	for _, s := range []struct {
		name  string
		flags []string
	}{
		{"main", mainFlags}, {"failing", failFlags()}} {
		if err := d.start(s.name, s.flags...); err != nil {
			fmt.Printf("FAIL grpc-go -> kcsi start: %v\n0 passed, 1 failed\n", err)
			return 1
		}
	}
	var err error
	if t.main, err = dial(d.endpoint("main")); err == nil {
		t.failing, err = dial(d.endpoint("failing"))
	}
	if err != nil {
		fmt.Printf("FAIL grpc-go -> kcsi start: %v\n0 passed, 1 failed\n", err)
		return 1
	}
	passed, failed, xfailed := 0, 0, 0
	for _, n := range todo {
		start := time.Now()
		detail, err := runCase(byName[n], t)
		ms := time.Since(start).Milliseconds()
		var kd knownDeviation
		switch {
		case err == nil:
			fmt.Printf("ok   grpc-go -> kcsi %s (%d ms): %s\n", n, ms, detail)
			passed++
		case errors.As(err, &kd):
			fmt.Printf("xfail grpc-go -> kcsi %s: %s\n", n, kd.msg)
			xfailed++
		default:
			fmt.Printf("FAIL grpc-go -> kcsi %s: %v\n", n, err)
			failed++
		}
	}
	t.main.close()
	t.failing.close()
	var started []string
	for n := range d.procs {
		started = append(started, n)
	}
	sort.Strings(started)
	for _, n := range started {
		d.kill(n, syscall.SIGTERM)
	}
	if xfailed > 0 {
		fmt.Printf("%d known deviation(s) (xfail), see above\n", xfailed)
	}
	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		return 1
	}
	return 0
}

// runCase turns a panic in a case into its failure, so one broken case cannot hide the others.
func runCase(c testCase, t *harness) (detail string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = failf("panic: %v", r)
		}
	}()
	return c.fn(t)
}
