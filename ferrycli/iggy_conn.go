package ferrycli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
)

// connFlags are the connection flags of the commands that talk to Iggy directly (stream,
// topic, produce, consume): the [iggy] section of the runtime config `ferry run` reads,
// overridden flag by flag.
type connFlags struct {
	config, addr, user, password, token string
	timeout                             time.Duration
}

func (f *connFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.config, "config", envString(envConfig, ""), "take [iggy] address, credentials and TLS from this config.toml (default: the one ferry run finds, else the defaults) [FERRY_CONFIG]")
	fl.StringVar(&f.addr, "addr", envString(envAddr, ""), "Iggy address (default iggy.address, else localhost:8090) [FERRY_ADDR]")
	fl.StringVar(&f.user, "username", envString(envUser, ""), "username (default iggy.username, else iggy) [FERRY_USERNAME]")
	fl.StringVar(&f.password, "password", envString(envPassword, ""), "password (default iggy.password, else iggy) [FERRY_PASSWORD]")
	fl.StringVar(&f.token, "token", envString(envToken, ""), "personal access token, or file:<path> (wins over username and password) [FERRY_TOKEN]")
	fl.DurationVar(&f.timeout, "connect-timeout", 10*time.Second, "bound on connecting and logging in")
}

// iggyConfig is the [iggy] section the flags select: the config's (a named config that
// does not load is an error; none found gives the defaults), then each flag given.
func (f *connFlags) iggyConfig() (config.Iggy, error) {
	rc, err := loadStatusConfig(f.config)
	if err != nil {
		return config.Iggy{}, err
	}
	ic := rc.Iggy
	if f.addr != "" {
		ic.Address = f.addr
	}
	if f.user != "" {
		ic.Username = f.user
	}
	if f.password != "" {
		ic.Password = config.Secret(f.password)
	}
	if f.token != "" {
		ic.Token = config.Secret(f.token)
	}
	return ic, nil
}

// dial connects and logs in as `ferry run` would, within --connect-timeout.
func (f *connFlags) dial(ctx context.Context) (*iggy.Client, error) {
	ic, err := f.iggyConfig()
	if err != nil {
		return nil, err
	}
	opts, err := clientOptions(ic, discardLogger())
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	c, err := iggy.Dial(dctx, ic.Address, opts...)
	if err != nil {
		return nil, hint(fmt.Errorf("connect to Iggy at %s: %w", ic.Address, err))
	}
	return c, nil
}

// hint appends to err what an operator does about it, for the server's answers a command
// of this family meets; err's own text (the server's words) stays first.
func hint(err error) error {
	var what string
	switch {
	case err == nil:
		return nil
	case errors.Is(err, wire.ErrInvalidCredentials), errors.Is(err, wire.ErrUnauthenticated):
		what = "check --username and --password, or --token, or [iggy] username, password and token of --config"
	case errors.Is(err, wire.ErrUnauthorized):
		what = "the user lacks the permission; log in as a user that has it"
	case errors.Is(err, iggy.ErrNotConnected):
		what = "is an Iggy server running there? Give its address with --addr or [iggy] address; ferry server starts one"
	case errors.Is(err, wire.ErrStreamIDNotFound):
		what = "no such stream: ferry stream list shows them, ferry stream create makes one"
	case errors.Is(err, wire.ErrTopicIDNotFound):
		what = "no such topic: ferry topic list STREAM shows them, ferry topic create makes one"
	case errors.Is(err, wire.ErrPartitionNotFound):
		what = "no such partition: ferry topic list STREAM shows how many the topic has (ids count from 0)"
	case errors.Is(err, wire.ErrStreamNameAlreadyExists):
		what = "a stream of that name exists already: ferry stream list shows them"
	case errors.Is(err, wire.ErrTopicNameAlreadyExists):
		what = "a topic of that name exists already in the stream: ferry topic list STREAM shows them"
	case errors.Is(err, wire.ErrConsumerGroupIDNotFound):
		what = "no such consumer group on the topic: a connector creates its group when it starts"
	default:
		return err
	}
	return fmt.Errorf("%w; %s", err, what)
}

// ident is a stream or topic argument: a name, or a numeric id as digits.
func ident(s string) iggy.Identifier {
	var n uint32
	if _, err := fmt.Sscanf(s, "%d", &n); err == nil && fmt.Sprint(n) == s {
		return iggy.ID(n)
	}
	return iggy.Name(s)
}
