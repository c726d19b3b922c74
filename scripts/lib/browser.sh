# What the console's browser test needs: Debian's Chromium and chromedriver
# (apt-get) and Selenium (PyPI) in a venv of its own. Sourced after
# common.sh; browser_install is idempotent and quick when all is there.

SELENIUM_VERSION="4.51.0"
CONSOLE_VENV="$TOOLS_DIR/console-venv"
CHROMIUM_BIN="/usr/bin/chromium"
CHROMEDRIVER_BIN="/usr/bin/chromedriver"

browser_install() {
  if [ ! -x "$CHROMIUM_BIN" ] || [ ! -x "$CHROMEDRIVER_BIN" ]; then
    log "installing Chromium and chromedriver (Debian's chromium, chromium-driver)"
    local sudo=()
    [ "$(id -u)" = 0 ] || sudo=(sudo)
    "${sudo[@]}" apt-get update -qq >&2 \
      && "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >&2 \
      || die "cannot install Chromium: apt-get install chromium chromium-driver failed"
    [ -x "$CHROMIUM_BIN" ] && [ -x "$CHROMEDRIVER_BIN" ] \
      || die "chromium installed but $CHROMIUM_BIN or $CHROMEDRIVER_BIN is missing"
  fi
  if ! "$CONSOLE_VENV/bin/python" - "$SELENIUM_VERSION" 2>/dev/null <<'PY'
import sys, importlib.metadata as m, selenium.webdriver
sys.exit(m.version("selenium") != sys.argv[1])
PY
  then
    log "installing selenium==$SELENIUM_VERSION from PyPI into $CONSOLE_VENV"
    python3 -m venv "$CONSOLE_VENV" \
      && "$CONSOLE_VENV/bin/pip" install -q "selenium==$SELENIUM_VERSION" >&2 \
      || die "cannot install selenium==$SELENIUM_VERSION from PyPI"
  fi
}
