// csipeer: a CSI peer built on grpc-go (google.golang.org/grpc), the gRPC implementation the
// kubelet and every upstream sidecar use, to test kcsi's CSI transport (src/csi) against it in
// both directions. tests/e2e/grpc_interop_go.sh runs it; docs/development.md ("Interoperability
// with grpc-go") says what each case checks.
//
//	csipeer server --listen unix:///path.sock [--program JSON] [--record FILE] [--pidfile FILE]
//	               [--window BYTES] [--max-streams N] [--keepalive-min-time DUR]
//	               [--keepalive-permit-without-stream] [--keepalive-time DUR]
//	csipeer client --testdriver PATH --dir DIR [--libgrpc-server] [CASE ...]
//
// Both modes use the Go bindings the CSI spec module generates (lib/go/csi), the ones upstream's
// sidecars are built with, so the schema is the spec's own rather than kcsi's copy of it.
//
// Server mode (server.go) serves the Identity and Controller services for kcsi's client
// (tests/interop/interop_client.c), every method programmed by --program and by per-call keys
// in the request, and records every call start, answer and cancellation in --record.
//
// Client mode (client.go, cases.go) drives kcsi's server (tests/csi-testdriver, which it starts,
// kills and restarts itself) through named cases and prints one line per case: "ok", "FAIL",
// or "xfail" (a known deviation, named with its reason; it does not fail the run). It ends with
// "N passed, M failed" and exits 1 when any case failed.
package main

import (
	"fmt"
	"os"
	"strings"
	"time"
)

const (
	mib               = 1024 * 1024
	limit             = 4 * mib          // gRPC's default largest message, and kcsi's max_recv_bytes
	nearLimit         = 39 * mib / 10    // 3.9 MiB
	overLimit         = 45 * mib / 10    // 4.5 MiB
	smallWin          = 64 * 1024        // grpc-go's smallest window, for the flow-control cases
	upstreamKeepalive = 10 * time.Second // grpc-go's smallest client keepalive time
)

type options struct {
	listen, program, record, pidfile string
	testdriver, dir                  string
	libgrpcServer                    bool
	window, maxStreams               int
	kaMinTime, kaTime                time.Duration
	kaPermitWithoutStream            bool
}

func usage(msg string) {
	fmt.Fprintf(os.Stderr, "csipeer: %s\n"+
		"usage: csipeer server --listen unix:///path [--program JSON] [--record FILE] [--pidfile FILE]\n"+
		"                      [--window BYTES] [--max-streams N] [--keepalive-min-time DUR]\n"+
		"                      [--keepalive-permit-without-stream] [--keepalive-time DUR]\n"+
		"       csipeer client --testdriver PATH --dir DIR [--libgrpc-server] [CASE ...]\n"+
		"server flags:\n"+
		"  --program JSON    per-method behaviour: {\"Method\": BEHAVIOUR or [BEHAVIOUR, ...]}\n"+
		"  --record FILE     append one JSON line per call start, answer and cancellation\n"+
		"  --pidfile FILE    write the pid once listening\n"+
		"  --window BYTES    grpc.InitialWindowSize and InitialConnWindowSize (static windows)\n"+
		"  --max-streams N   grpc.MaxConcurrentStreams\n"+
		"  --keepalive-min-time DUR, --keepalive-permit-without-stream\n"+
		"                    keepalive.EnforcementPolicy (default: grpc-go's, 5m and false)\n"+
		"  --keepalive-time DUR  keepalive.ServerParameters.Time: the server pings an idle client\n"+
		"client flags:\n"+
		"  --testdriver PATH  kcsi's tests/csi-testdriver, started by this program\n"+
		"  --dir DIR          sockets, logs and pid files of the drivers\n"+
		"  --libgrpc-server   the testdriver is csi-testdriver-libgrpc (known deviations differ)\n"+
		"cases: %s\n", msg, strings.Join(caseNames(), " "))
	os.Exit(2)
}

func parseArgs(argv []string) (options, []string) {
	var o options
	var rest []string
	valued := map[string]*string{"listen": &o.listen, "program": &o.program, "record": &o.record,
		"pidfile": &o.pidfile, "testdriver": &o.testdriver, "dir": &o.dir}
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		name := strings.TrimPrefix(a, "--")
		next := func() string {
			if i+1 >= len(argv) {
				usage(a + " needs a value")
			}
			i++
			return argv[i]
		}
		switch {
		case a == "--libgrpc-server":
			o.libgrpcServer = true
		case a == "--keepalive-permit-without-stream":
			o.kaPermitWithoutStream = true
		case a == "--window" || a == "--max-streams":
			v := next()
			var n int
			if _, err := fmt.Sscanf(v, "%d", &n); err != nil || n <= 0 {
				usage(fmt.Sprintf("%s: %q is not a positive number", a, v))
			}
			if a == "--window" {
				o.window = n
			} else {
				o.maxStreams = n
			}
		case a == "--keepalive-min-time" || a == "--keepalive-time":
			v := next()
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				usage(fmt.Sprintf("%s: %q is not a positive duration", a, v))
			}
			if a == "--keepalive-time" {
				o.kaTime = d
			} else {
				o.kaMinTime = d
			}
		case strings.HasPrefix(a, "--") && valued[name] != nil:
			*valued[name] = next()
		case strings.HasPrefix(a, "--"):
			usage("unknown flag " + a)
		default:
			rest = append(rest, a)
		}
	}
	return o, rest
}

func main() {
	if len(os.Args) < 2 {
		usage("the first argument is server or client")
	}
	o, rest := parseArgs(os.Args[2:])
	switch os.Args[1] {
	case "server":
		if !strings.HasPrefix(o.listen, "unix:///") {
			usage("server needs --listen unix:///path")
		}
		if len(rest) > 0 {
			usage("server takes no arguments: " + strings.Join(rest, " "))
		}
		os.Exit(serve(o))
	case "client":
		if o.testdriver == "" || o.dir == "" {
			usage("client needs --testdriver and --dir")
		}
		os.Exit(runClient(o, rest))
	default:
		usage("the first argument is server or client")
	}
}
