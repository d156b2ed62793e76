package store_test

import (
	"testing"

	"github.com/zidane-server/zidane/server/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }
