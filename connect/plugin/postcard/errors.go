package postcard

import (
	"fmt"

	"github.com/ferryio/ferry/sdk"
)

func errHeaderKind(k sdk.HeaderKind) error {
	return fmt.Errorf("postcard: header kind %d outside 1..15: %w", k, ErrUnknownVariant)
}
