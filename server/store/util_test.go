package store

import (
	"errors"
	"fmt"
)

func errorsIs(err, target error) bool { return errors.Is(err, target) }

func fmtSlice[T any](s []T) string { return fmt.Sprint(s) }
