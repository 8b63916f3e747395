// Server mode: the Identity and Controller services of the CSI spec's Go bindings, served by a
// grpc-go server on a unix socket for kcsi's client (tests/interop/interop_client.c).
//
// What each method does is programmed, two ways:
//   - per method, by --program: {"GetPluginInfo": BEHAVIOUR, "Probe": [BEHAVIOUR, ...], ...};
//     a list gives the n-th call the n-th entry (the last one repeats);
//   - per call, by keys "interop.<field>" in the request's `parameters` (or `volume_context`)
//     map, which override the method's behaviour for that call only.
//
// BEHAVIOUR fields: reply (the response in protojson, proto field names accepted), delay_ms,
// code and message (fail with that status), details (add a grpc-status-details-bin trailer: a
// google.rpc.Status whose one Any holds that many payload bytes), reply_bytes (pad the response
// to that serialized size). Without a reply, CreateVolume echoes its request (echoVolume) and
// other methods answer an empty response.
//
// The services are registered from the descriptors of csi.proto (one generic handler per
// method, request and response types from the protobuf registry), so every method the spec has
// is served without a line per method. A codec wrapper keeps the request's size on the wire.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
)

type behaviour struct {
	Reply      json.RawMessage `json:"reply"`
	DelayMs    int64           `json:"delay_ms"`
	Code       int             `json:"code"`
	Message    string          `json:"message"`
	Details    int             `json:"details"`
	ReplyBytes int             `json:"reply_bytes"`
}

type peerServer struct {
	program  map[string][]behaviour
	mu       sync.Mutex // guards counts, inflight and the record file
	counts   map[string]int
	inflight int
	record   *os.File
	sizes    sync.Map // request message -> its bytes on the wire (sizeCodec)
}

// sizeCodec is grpc-go's proto codec that also remembers each request's size on the wire, which
// a re-encoding would not give back for input that is not canonical.
type sizeCodec struct {
	encoding.CodecV2
	p *peerServer
}

func (c sizeCodec) Unmarshal(data mem.BufferSlice, v any) error {
	c.p.sizes.Store(v, data.Len())
	return c.CodecV2.Unmarshal(data, v)
}

// The program: each method's value is one behaviour or a list of them.
func parseProgram(text string) (map[string][]behaviour, error) {
	prog := map[string][]behaviour{}
	if text == "" {
		return prog, nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text), &raw); err != nil {
		return nil, fmt.Errorf("--program: %v", err)
	}
	for m, v := range raw {
		var list []behaviour
		if strings.HasPrefix(strings.TrimSpace(string(v)), "[") {
			if err := json.Unmarshal(v, &list); err != nil {
				return nil, fmt.Errorf("--program %s: %v", m, err)
			}
		} else {
			var b behaviour
			if err := json.Unmarshal(v, &b); err != nil {
				return nil, fmt.Errorf("--program %s: %v", m, err)
			}
			list = []behaviour{b}
		}
		prog[m] = list
	}
	return prog, nil
}

// A string field of the request by proto name, "" when the message has none.
func stringField(m protoreflect.Message, name string) string {
	if fd := m.Descriptor().Fields().ByName(protoreflect.Name(name)); fd != nil &&
		fd.Kind() == protoreflect.StringKind && !fd.IsList() {
		return m.Get(fd).String()
	}
	return ""
}

// The request's parameters (or volume_context) map, for the per-call overrides.
func overrideMap(m protoreflect.Message) map[string]string {
	out := map[string]string{}
	for _, name := range []string{"parameters", "volume_context"} {
		fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
		if fd == nil || !fd.IsMap() {
			continue
		}
		m.Get(fd).Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
			out[k.String()] = v.String()
			return true
		})
		return out
	}
	return out
}

// The method's behaviour for its n-th call (1-based), with the request's overrides.
func (p *peerServer) behaviourFor(method string, n int, req protoreflect.Message) (behaviour, error) {
	var b behaviour
	if list := p.program[method]; len(list) > 0 {
		b = list[min(n, len(list))-1]
	}
	for k, v := range overrideMap(req) {
		field, ok := strings.CutPrefix(k, "interop.")
		if !ok {
			continue
		}
		if field == "message" {
			b.Message = v
			continue
		}
		num, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return b, fmt.Errorf("%s: %q is not a number", k, v)
		}
		switch field {
		case "delay_ms":
			b.DelayMs = num
		case "code":
			b.Code = int(num)
		case "details":
			b.Details = int(num)
		case "reply_bytes":
			b.ReplyBytes = int(num)
		default:
			return b, fmt.Errorf("unknown override %s", k)
		}
	}
	return b, nil
}

// recordEvent appends {"t":ms,"method":...,"key":...,"event":...,<extra>} to --record; the field
// order is fixed because interop_client.c finds lines by substrings.
func (p *peerServer) recordEvent(method, key, event, extra string) {
	if p.record == nil {
		return
	}
	m, _ := json.Marshal(method)
	k, _ := json.Marshal(key)
	line := fmt.Sprintf("{\"t\":%d,\"method\":%s,\"key\":%s,\"event\":\"%s\"%s}\n",
		time.Now().UnixMilli(), m, k, event, extra)
	p.record.WriteString(line) // O_APPEND: one write per line
}

// A google.rpc.Status with one Any whose payload holds `size` bytes, every byte value included.
func statusWithDetails(code int, message string, size int) error {
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(i)
	}
	s := &spb.Status{Code: int32(code), Message: message,
		Details: []*anypb.Any{{TypeUrl: "type.kcsi.dev/interop.Detail", Value: payload}}}
	return status.FromProto(s).Err()
}

// CreateVolume's default answer: the request mirrored into the response, so that one round trip
// shows every field kind arriving intact both ways. volume_context holds the parameters (not the
// interop.* ones), each secret as "secret/<key>", the first capability's access mode, fs type
// and mount flags, and the request's size on the wire.
func echoVolume(req *csi.CreateVolumeRequest, wireBytes int) *csi.CreateVolumeResponse {
	ctx := map[string]string{}
	for k, v := range req.GetParameters() {
		if !strings.HasPrefix(k, "interop.") {
			ctx[k] = v
		}
	}
	for k, v := range req.GetSecrets() {
		ctx["secret/"+k] = v
	}
	if caps := req.GetVolumeCapabilities(); len(caps) > 0 {
		ctx["access_mode"] = caps[0].GetAccessMode().GetMode().String()
		if m := caps[0].GetMount(); m != nil {
			ctx["fs_type"] = m.GetFsType()
			ctx["mount_flags"] = strings.Join(m.GetMountFlags(), ",")
		}
	}
	ctx["request_bytes"] = strconv.Itoa(wireBytes)
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId:           "vol-" + req.GetName(),
		CapacityBytes:      req.GetCapacityRange().GetRequiredBytes(),
		VolumeContext:      ctx,
		ContentSource:      req.GetVolumeContentSource(),
		AccessibleTopology: req.GetAccessibilityRequirements().GetRequisite(),
	}}
}

// Pads resp to exactly `bytes` serialized, in a map field of the response (when possible: never
// below its own size).
func padReply(method string, resp proto.Message, bytes int) error {
	var pad map[string]string
	switch r := resp.(type) {
	case *csi.GetPluginInfoResponse:
		if r.Manifest == nil {
			r.Manifest = map[string]string{}
		}
		pad = r.Manifest
	case *csi.CreateVolumeResponse:
		if r.Volume == nil {
			r.Volume = &csi.Volume{VolumeId: "padded"}
		}
		if r.Volume.VolumeContext == nil {
			r.Volume.VolumeContext = map[string]string{}
		}
		pad = r.Volume.VolumeContext
	default:
		return fmt.Errorf("reply_bytes is not supported for %s", method)
	}
	pad["interop.pad"] = ""
	for i := 0; i < 4; i++ {
		size := proto.Size(resp)
		if size == bytes {
			break
		}
		pad["interop.pad"] = strings.Repeat("p", max(0, len(pad["interop.pad"])+bytes-size))
	}
	return nil
}

func (p *peerServer) handle(ctx context.Context, method string, req proto.Message,
	out protoreflect.MessageType) (any, error) {
	wire, _ := p.sizes.LoadAndDelete(req)
	wireBytes, _ := wire.(int)
	m := req.ProtoReflect()
	key := stringField(m, "name")
	if key == "" {
		key = stringField(m, "volume_id")
	}
	start := time.Now()
	timeout := "null"
	if dl, ok := ctx.Deadline(); ok {
		timeout = strconv.FormatInt(time.Until(dl).Milliseconds(), 10)
	}
	p.mu.Lock()
	p.counts[method]++
	n := p.counts[method]
	p.inflight++
	p.recordEvent(method, key, "start", fmt.Sprintf(",\"timeout_ms\":%s,\"inflight\":%d",
		timeout, p.inflight))
	p.mu.Unlock()
	answered := func(err error) {
		p.mu.Lock()
		p.inflight--
		if err != nil {
			p.recordEvent(method, key, "error", fmt.Sprintf(",\"code\":%d", status.Code(err)))
		} else {
			p.recordEvent(method, key, "ok", ",\"code\":0")
		}
		p.mu.Unlock()
	}

	b, err := p.behaviourFor(method, n, m)
	if err != nil {
		err = status.Errorf(codes.Internal, "bad program: %v", err)
		answered(err)
		return nil, err
	}
	if b.DelayMs > 0 {
		t := time.NewTimer(time.Duration(b.DelayMs) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			p.mu.Lock()
			p.inflight--
			p.recordEvent(method, key, "cancelled",
				fmt.Sprintf(",\"after_ms\":%d,\"why\":%q", time.Since(start).Milliseconds(),
					ctx.Err().Error()))
			p.mu.Unlock()
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	resp, err := p.reply(method, b, req, wireBytes, out)
	answered(err)
	return resp, err
}

func (p *peerServer) reply(method string, b behaviour, req proto.Message, wireBytes int,
	out protoreflect.MessageType) (proto.Message, error) {
	if b.Code != 0 {
		if b.Details > 0 {
			return nil, statusWithDetails(b.Code, b.Message, b.Details)
		}
		return nil, status.Error(codes.Code(b.Code), b.Message)
	}
	var resp proto.Message
	switch {
	case len(b.Reply) > 0:
		resp = out.New().Interface()
		if err := protojson.Unmarshal(b.Reply, resp); err != nil {
			return nil, status.Errorf(codes.Internal, "peer: bad reply for %s: %v", method, err)
		}
	case method == "CreateVolume":
		resp = echoVolume(req.(*csi.CreateVolumeRequest), wireBytes)
	default:
		resp = out.New().Interface()
	}
	if b.ReplyBytes > 0 {
		if err := padReply(method, resp, b.ReplyBytes); err != nil {
			return nil, status.Errorf(codes.Internal, "peer: %v", err)
		}
	}
	return resp, nil
}

// A grpc.ServiceDesc for a service of csi.proto, every method going to p.handle.
func (p *peerServer) serviceDesc(svc string) *grpc.ServiceDesc {
	sd := csi.File_csi_proto.Services().ByName(protoreflect.Name(svc))
	desc := &grpc.ServiceDesc{ServiceName: string(sd.FullName()), HandlerType: (*any)(nil),
		Metadata: csi.File_csi_proto.Path()}
	for i := 0; i < sd.Methods().Len(); i++ {
		md := sd.Methods().Get(i)
		in, err1 := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
		out, err2 := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
		if err1 != nil || err2 != nil {
			panic(fmt.Sprintf("csi.proto %s: types not registered", md.FullName()))
		}
		name := string(md.Name())
		desc.Methods = append(desc.Methods, grpc.MethodDesc{MethodName: name,
			Handler: func(_ any, ctx context.Context, dec func(any) error,
				_ grpc.UnaryServerInterceptor) (any, error) {
				req := in.New().Interface()
				if err := dec(req); err != nil {
					p.sizes.Delete(req)
					return nil, err
				}
				return p.handle(ctx, name, req, out)
			}})
	}
	return desc
}

func serve(o options) int {
	prog, err := parseProgram(o.program)
	if err != nil {
		fmt.Fprintf(os.Stderr, "csipeer: %v\n", err)
		return 2
	}
	p := &peerServer{program: prog, counts: map[string]int{}}
	if o.record != "" {
		if p.record, err = os.OpenFile(o.record, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "csipeer: %v\n", err)
			return 1
		}
	}
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(limit),
		grpc.ForceServerCodecV2(sizeCodec{encoding.GetCodecV2("proto"), p}),
	}
	if o.window > 0 {
		opts = append(opts, grpc.InitialWindowSize(int32(o.window)),
			grpc.InitialConnWindowSize(int32(o.window)))
	}
	if o.maxStreams > 0 {
		opts = append(opts, grpc.MaxConcurrentStreams(uint32(o.maxStreams)))
	}
	if o.kaMinTime > 0 || o.kaPermitWithoutStream {
		kep := keepalive.EnforcementPolicy{MinTime: o.kaMinTime,
			PermitWithoutStream: o.kaPermitWithoutStream}
		if kep.MinTime == 0 {
			kep.MinTime = 5 * time.Minute // grpc-go's default
		}
		opts = append(opts, grpc.KeepaliveEnforcementPolicy(kep))
	}
	if o.kaTime > 0 {
		opts = append(opts, grpc.KeepaliveParams(keepalive.ServerParameters{Time: o.kaTime,
			Timeout: o.kaTime}))
	}
	server := grpc.NewServer(opts...)
	server.RegisterService(p.serviceDesc("Identity"), struct{}{})
	server.RegisterService(p.serviceDesc("Controller"), struct{}{})

	sock := strings.TrimPrefix(o.listen, "unix://")
	// A predecessor killed -9 left its socket; the test owns this path.
	if err := os.Remove(sock); err != nil && !os.IsNotExist(err) {
		fmt.Fprintf(os.Stderr, "csipeer: %v\n", err)
		return 1
	}
	lis, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Fprintf(os.Stderr, "csipeer: cannot listen on %s: %v\n", o.listen, err)
		return 1
	}
	if o.pidfile != "" {
		if err := os.WriteFile(o.pidfile, []byte(fmt.Sprintf("%d\n", os.Getpid())), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "csipeer: %v\n", err)
			return 1
		}
	}
	fmt.Fprintf(os.Stderr, "csipeer: grpc-go %s serving on %s\n", grpc.Version, o.listen)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		// Calls in flight get half a second, so that SIGTERM ends the process within a second.
		t := time.AfterFunc(500*time.Millisecond, server.Stop)
		server.GracefulStop()
		t.Stop()
	}()
	if err := server.Serve(lis); err != nil {
		fmt.Fprintf(os.Stderr, "csipeer: %v\n", err)
		return 1
	}
	return 0
}
