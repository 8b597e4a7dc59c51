package launcherapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"

	"github.com/d8virt/kubevirt-core/pkg/unixsock"
)

// ServiceName is the gRPC service of the launcher's command server.
const ServiceName = "kubevirt.launcher.v1.Cmd"

// codec carries the messages as JSON; both ends force it, so no protobuf registry is involved.
type codec struct{}

func (codec) Name() string { return "json" }

func (codec) Marshal(v any) (mem.BufferSlice, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("launcherapi: encode %T: %w", v, err)
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (codec) Unmarshal(data mem.BufferSlice, v any) error {
	if err := json.Unmarshal(data.Materialize(), v); err != nil {
		return fmt.Errorf("launcherapi: decode %T: %w", v, err)
	}
	return nil
}

// Server is what the launcher implements. Every call is idempotent: the handler retries after
// timeouts and reconnects, so a second Shutdown or Pause must not fail because the first worked.
type Server interface {
	Ping(context.Context, *Empty) (*Empty, error)
	Sync(context.Context, *SyncRequest) (*DomainStatus, error)
	Shutdown(context.Context, *ShutdownRequest) (*Empty, error)
	Kill(context.Context, *Empty) (*Empty, error)
	Pause(context.Context, *Empty) (*Empty, error)
	Unpause(context.Context, *Empty) (*Empty, error)
	Freeze(context.Context, *Empty) (*Empty, error)
	Unfreeze(context.Context, *Empty) (*Empty, error)
	SoftReboot(context.Context, *Empty) (*Empty, error)
	// Reset resets the guest at once, as the reset button of a machine does.
	Reset(context.Context, *Empty) (*Empty, error)
	Status(context.Context, *Empty) (*DomainStatus, error)
	// Watch sends the current status at once and then every change, until the client goes away
	// or the launcher exits.
	Watch(*Empty, grpc.ServerStreamingServer[DomainStatus]) error
	// MigrationServer moves a running guest to another launcher (see migration.go).
	MigrationServer
	// GuestAgentServer tells what the guest agent reports (see guestagent.go).
	GuestAgentServer
	// DomainStatsServer reads libvirt's counters of the domain (see domainstats.go).
	DomainStatsServer
}

// unary builds the method entry of a unary call of Server.
func unary[Req any, Resp any](name string, call func(Server, context.Context, *Req) (*Resp, error)) grpc.MethodDesc {
	return grpc.MethodDesc{
		MethodName: name,
		Handler: func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			in := new(Req)
			if err := dec(in); err != nil {
				return nil, err
			}
			s := srv.(Server)
			if icpt == nil {
				return call(s, ctx, in)
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: "/" + ServiceName + "/" + name}
			return icpt(ctx, in, info, func(ctx context.Context, req any) (any, error) {
				return call(s, ctx, req.(*Req))
			})
		},
	}
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: ServiceName,
	HandlerType: (*Server)(nil),
	Methods: []grpc.MethodDesc{
		unary("Ping", Server.Ping),
		unary("Sync", Server.Sync),
		unary("Shutdown", Server.Shutdown),
		unary("Kill", Server.Kill),
		unary("Pause", Server.Pause),
		unary("Unpause", Server.Unpause),
		unary("Freeze", Server.Freeze),
		unary("Unfreeze", Server.Unfreeze),
		unary("SoftReboot", Server.SoftReboot),
		unary("Reset", Server.Reset),
		unary("Status", Server.Status),
		unary("PrepareMigrationTarget", Server.PrepareMigrationTarget),
		unary("Migrate", Server.Migrate),
		unary("CancelMigration", Server.CancelMigration),
		unary("GuestInfo", Server.GuestInfo),
		unary("DomainStats", Server.DomainStats),
	},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Watch",
		ServerStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error {
			in := new(Empty)
			if err := stream.RecvMsg(in); err != nil {
				return err
			}
			return srv.(Server).Watch(in, &grpc.GenericServerStream[Empty, DomainStatus]{ServerStream: stream})
		},
	}},
}

// NewGRPCServer returns a gRPC server serving s with the JSON codec; the caller serves it on the
// command socket.
func NewGRPCServer(s Server, opts ...grpc.ServerOption) *grpc.Server {
	srv := grpc.NewServer(append([]grpc.ServerOption{grpc.ForceServerCodecV2(codec{})}, opts...)...)
	srv.RegisterService(&serviceDesc, s)
	return srv
}

// Client calls a launcher.
type Client struct {
	conn *grpc.ClientConn
}

// Dial connects to the launcher's command socket. The connection is lazy: errors show on the
// first call.
func Dial(socket string) (*Client, error) {
	conn, err := grpc.NewClient("unix://"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec{})),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return unixsock.Dial(ctx, socket)
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("launcherapi: dial %s: %w", socket, err)
	}
	return &Client{conn: conn}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

func invoke[Resp any](ctx context.Context, c *Client, method string, req any) (*Resp, error) {
	out := new(Resp)
	if err := c.conn.Invoke(ctx, "/"+ServiceName+"/"+method, req, out); err != nil {
		return nil, fmt.Errorf("launcher %s: %w", method, err)
	}
	return out, nil
}

func (c *Client) Ping(ctx context.Context) error {
	_, err := invoke[Empty](ctx, c, "Ping", &Empty{})
	return err
}

func (c *Client) Sync(ctx context.Context, req *SyncRequest) (*DomainStatus, error) {
	return invoke[DomainStatus](ctx, c, "Sync", req)
}

func (c *Client) Shutdown(ctx context.Context, req *ShutdownRequest) error {
	_, err := invoke[Empty](ctx, c, "Shutdown", req)
	return err
}

func (c *Client) Kill(ctx context.Context) error {
	_, err := invoke[Empty](ctx, c, "Kill", &Empty{})
	return err
}

func (c *Client) Pause(ctx context.Context) error {
	_, err := invoke[Empty](ctx, c, "Pause", &Empty{})
	return err
}

func (c *Client) Unpause(ctx context.Context) error {
	_, err := invoke[Empty](ctx, c, "Unpause", &Empty{})
	return err
}

func (c *Client) Freeze(ctx context.Context) error {
	_, err := invoke[Empty](ctx, c, "Freeze", &Empty{})
	return err
}

func (c *Client) Unfreeze(ctx context.Context) error {
	_, err := invoke[Empty](ctx, c, "Unfreeze", &Empty{})
	return err
}

func (c *Client) SoftReboot(ctx context.Context) error {
	_, err := invoke[Empty](ctx, c, "SoftReboot", &Empty{})
	return err
}

func (c *Client) Reset(ctx context.Context) error {
	_, err := invoke[Empty](ctx, c, "Reset", &Empty{})
	return err
}

func (c *Client) Status(ctx context.Context) (*DomainStatus, error) {
	return invoke[DomainStatus](ctx, c, "Status", &Empty{})
}

// Watch streams the domain's status: the current one first, then each change. It ends with the
// context, the launcher's exit, or a broken connection.
func (c *Client) Watch(ctx context.Context) (grpc.ServerStreamingClient[DomainStatus], error) {
	desc := &serviceDesc.Streams[0]
	stream, err := c.conn.NewStream(ctx, desc, "/"+ServiceName+"/Watch")
	if err != nil {
		return nil, fmt.Errorf("launcher Watch: %w", err)
	}
	x := &grpc.GenericClientStream[Empty, DomainStatus]{ClientStream: stream}
	if err := x.SendMsg(&Empty{}); err != nil {
		return nil, fmt.Errorf("launcher Watch: %w", err)
	}
	if err := x.CloseSend(); err != nil {
		return nil, fmt.Errorf("launcher Watch: %w", err)
	}
	return x, nil
}
