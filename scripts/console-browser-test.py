"""Drives the admin console (/ui) in headless Chromium through chromedriver.

Run by e2e/tests/console.rs against a live stack (wrangler dev over the local
libSQL server). Everything the console shows is checked against what the
public API says, and what the console does is checked through the API.

Environment: MQLITE_URL, MQLITE_TOKEN (an administrator token), OUT_DIR
(screenshots, browser log), CHROMIUM, CHROMEDRIVER. Exit status 0 only when
every step passed; the last line is `N passed, N failed`.
"""

import base64
import json
import os
import shutil
import struct
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

BASE = os.environ["MQLITE_URL"].rstrip("/")
TOKEN = os.environ["MQLITE_TOKEN"]
OUT = os.environ["OUT_DIR"]
WAIT_S = 15


class Failed(Exception):
    pass


def check(cond, message):
    if not cond:
        raise Failed(message)


# ---------- the API, as any client sees it ----------


def http(method, path, body=None, token=None, headers=None):
    req = urllib.request.Request(BASE + path, method=method, data=body)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    if token:
        req.add_header("Authorization", "Bearer " + token)

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(req, timeout=30) as res:
            return res.status, dict(res.headers), res.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def rpc(name, body, token=TOKEN, expect=200):
    status, _, data = http("POST", "/mqlite.v1." + name, json.dumps(body).encode(), token,
                           {"Content-Type": "application/json"})
    check(status == expect, f"{name} {body} -> {status} {data[:300]!r}")
    return json.loads(data) if data else {}


def b64(text):
    return base64.b64encode(text.encode()).decode()


# ---------- the browser ----------


def start_browser(profile):
    options = webdriver.ChromeOptions()
    options.binary_location = os.environ["CHROMIUM"]
    for arg in ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--hide-scrollbars", "--force-device-scale-factor=1",
                "--window-size=1280,900", f"--user-data-dir={profile}"]:
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path=os.environ["CHROMEDRIVER"],
                      log_output=os.path.join(OUT, "chromedriver.log"))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(30)
    return driver


def wait_for(driver, what, predicate):
    deadline = time.monotonic() + WAIT_S
    last = None
    while time.monotonic() < deadline:
        try:
            value = predicate(driver)
            if value:
                return value
        except Exception as e:  # the element may not exist yet
            last = e
        time.sleep(0.1)
    shot(driver, "failure-" + what.replace(" ", "-")[:40])
    raise Failed(f"timed out waiting for {what} ({last!r})")


def text_of(driver, css):
    return driver.find_element(By.CSS_SELECTOR, css).text


def shot(driver, name):
    path = os.path.join(OUT, name + ".png")
    driver.save_screenshot(path)
    return path


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    check(head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG")
    return struct.unpack(">II", head[16:24])


def check_screenshot(path, width):
    """Non-trivial: the expected width, and far more bytes than a blank page."""
    w, h = png_size(path)
    size = os.path.getsize(path)
    check(w == width and h > 300, f"{path}: {w}x{h}")
    check(size > 15_000, f"{path}: only {size} bytes (blank page?)")


class BrowserLog:
    """The browser's console, drained after each step into browser.log."""

    def __init__(self, driver):
        self.driver = driver
        self.file = open(os.path.join(OUT, "browser.log"), "w")

    def drain(self, step):
        entries = self.driver.get_log("browser")
        for e in entries:
            self.file.write(f"[{step}] {e['level']} {e['source']} {e['message']}\n")
        self.file.flush()
        return [e for e in entries if e["level"] == "SEVERE"]


# ---------- the steps ----------


def main():
    os.makedirs(OUT, exist_ok=True)
    results = []
    profile = tempfile.mkdtemp(prefix="mqlite-console-chromium-")
    driver = None
    try:
        driver = start_browser(profile)
        log = BrowserLog(driver)
        state = {}
        steps = [
            ("console_routes_through_workerd", lambda: routes()),
            ("api_setup", lambda: api_setup(state)),
            ("load_without_a_token", lambda: load(driver, log)),
            ("wrong_token_shows_a_clear_error", lambda: wrong_token(driver, log)),
            ("sign_in_and_see_the_queue_with_its_counts", lambda: sign_in(driver, log, state)),
            ("open_the_queue_and_see_its_messages", lambda: open_queue(driver, log, state)),
            ("send_from_the_console_arrives_through_the_api", lambda: send(driver, log, state)),
            ("create_a_key_shown_once_and_revoke_one", lambda: keys(driver, log, state)),
            ("topics_and_filter_tester", lambda: topics(driver, log)),
            ("long_lists_are_paged", lambda: paging(driver, log)),
            ("a_queue_is_found_by_name_and_sorted_by_counts", lambda: find_and_sort(driver, log)),
            ("ten_thousand_queues_filter_and_sort_fast", lambda: many_queues(driver, log)),
            ("keyboard_reaches_the_views", lambda: keyboard(driver, log)),
            ("phone_width_390", lambda: phone(driver, log)),
            ("no_console_errors_in_the_browser_log", lambda: no_errors(log)),
        ]
        for name, step in steps:
            started = time.monotonic()
            try:
                step()
                results.append((name, None))
                print(f"ok   {name} ({time.monotonic() - started:.1f}s)", flush=True)
            except Exception as e:
                results.append((name, e))
                print(f"FAIL {name}: {e}", flush=True)
                traceback.print_exc()
                # Later steps build on earlier ones: stop at the first failure.
                break
    finally:
        if driver:
            driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
    failed = sum(1 for _, e in results if e)
    passed = len(results) - failed
    print(f"console browser test: screenshots in {OUT}")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed == 15 else 1


def routes():
    status, headers, _ = http("GET", "/ui")
    check(status == 301 and headers.get("Location") == "/ui/", f"/ui -> {status} {headers}")
    status, headers, body = http("GET", "/ui/")
    check(status == 200 and headers.get("Content-Type") == "text/html; charset=utf-8", f"{status} {headers}")
    check("default-src 'none'" in headers.get("Content-Security-Policy", ""), str(headers))
    check(b'<script src="console.js"' in body, "index.html")
    status, _, card = http("GET", "/")
    check(json.loads(card).get("ui") == "/ui", f"card {card!r}")
    status, _, _ = http("POST", "/uixyz")
    check(status == 401, f"/uixyz -> {status}")


def api_setup(state):
    rpc("AdminService/CreateQueue", {"name": "orders", "config": {"max_delivery_count": 3}})
    sent = rpc("QueueService/Send", {"queue": "orders", "messages": [
        {"body": b64("hello 1"), "message_id": "o-1", "subject": "order.created",
         "properties": {"region": "eu"}},
        {"body": b64("hello 2"), "message_id": "o-2"},
        {"body": base64.b64encode(bytes([0, 1, 2, 255])).decode(), "message_id": "o-3"},
    ]})
    state["seqs"] = sent["seq_numbers"]
    got = rpc("QueueService/Receive", {"queue": "orders", "max_messages": 1})
    check(len(got["messages"]) == 1, f"receive {got}")
    stats = rpc("QueueService/Stats", {"queue": "orders"})
    check((stats["active"], stats["locked"], stats["total"]) == (2, 1, 3), f"stats {stats}")
    state["stats"] = stats
    rpc("AdminService/Subscribe", {"topic": "events", "name": "events-eu",
                                   "filter": {"expr": "properties.region == \"eu\""}})
    key = rpc("AuthService/CreateKey", {"id": "ab" * 16, "name": "ci-reader", "permissions": ["listen"]})
    state["key"] = key
    rpc("QueueService/Stats", {"queue": "orders"}, token=key["token"])


def load(driver, log):
    driver.get(BASE + "/ui")
    wait_for(driver, "the sign-in form", lambda d: d.find_element(By.ID, "token").is_displayed())
    check(driver.current_url == BASE + "/ui/", driver.current_url)
    check(driver.title == "mqlite console", driver.title)
    check(not driver.find_element(By.ID, "nav").is_displayed(), "nav shown before sign-in")
    check_screenshot(shot(driver, "01-signin-1280"), 1280)
    severe = log.drain("load")
    check(not severe, f"errors while loading: {severe}")


def wrong_token(driver, log):
    field = driver.find_element(By.ID, "token")
    field.clear()
    field.send_keys("wrong-token" + Keys.ENTER)
    msg = wait_for(driver, "the 401 message", lambda d: text_of(d, "#signin-error"))
    check("401" in msg and "refused" in msg, msg)
    check(driver.execute_script("return sessionStorage.length") == 0, "a refused token was kept")
    check(driver.find_element(By.ID, "token").is_displayed(), "sign-in form hidden")
    check_screenshot(shot(driver, "02-wrong-token-1280"), 1280)
    # The refused call is the only error the browser may log: its 401.
    severe = log.drain("wrong token")
    check(len(severe) == 1 and "AdminService/ListQueues" in severe[0]["message"]
          and "401" in severe[0]["message"], f"unexpected browser errors: {severe}")


def sign_in(driver, log, state):
    field = driver.find_element(By.ID, "token")
    field.clear()
    field.send_keys(TOKEN)
    driver.find_element(By.ID, "signin-button").click()
    row = 'tr[data-queue="orders"]'
    stats = state["stats"]

    def counts(d):
        r = d.find_element(By.CSS_SELECTOR, row)
        cell = lambda c: r.find_element(By.CSS_SELECTOR, f"[data-col={c}]").text
        return (cell("active"), cell("locked"), cell("total")) == (
            str(stats["active"]), str(stats["locked"]), str(stats["total"])) and cell("oldest") != "—"

    wait_for(driver, "the orders row with its counts", counts)
    check(driver.find_element(By.CSS_SELECTOR, 'tr[data-queue="events-eu"]'), "subscription queue listed")
    check(driver.execute_script("return sessionStorage.getItem('mqlite.token')") == TOKEN, "token not in sessionStorage")
    check(driver.execute_script("return localStorage.length") == 0, "localStorage used")
    check(driver.execute_script("return document.cookie") == "", "cookie set")
    # The charts have drawn their first sample, and a refresh keeps the layout.
    wait_for(driver, "the charts", lambda d: d.find_elements(By.CSS_SELECTOR, "#chart-states polyline"))
    before = driver.find_element(By.CSS_SELECTOR, row).rect
    time.sleep(5.5)
    wait_for(driver, "a second sample", lambda d: len(d.find_element(By.CSS_SELECTOR, "#chart-states polyline")
                                                       .get_attribute("points").split()) >= 2)
    check(driver.find_element(By.CSS_SELECTOR, row).rect == before, "the row moved on refresh")
    check_screenshot(shot(driver, "03-overview-1280"), 1280)
    check(not log.drain("sign in"), "errors after sign-in")


def open_queue(driver, log, state):
    driver.find_element(By.CSS_SELECTOR, 'tr[data-queue="orders"] a').click()
    wait_for(driver, "the queue page", lambda d: text_of(d, "#queue-name") == "orders")
    wait_for(driver, "three messages", lambda d: len(d.find_elements(By.CSS_SELECTOR, "#messages-body tr[data-seq]")) == 3)
    rows = driver.find_elements(By.CSS_SELECTOR, "#messages-body tr[data-seq]")
    check([int(r.get_attribute("data-seq")) for r in rows] == state["seqs"], "seqs differ from the API's")
    check("locked" in rows[0].text and "o-1" in rows[0].text, rows[0].text)
    wait_for(driver, "the counts", lambda d: text_of(d, '[data-count="active"]') == "2"
             and text_of(d, '[data-count="locked"]') == "1")
    check("3" == text_of(driver, '[data-count="total"]'), "total")
    config = text_of(driver, "#queue-config")
    check("max delivery count\n3" in config, config)
    # Details: text body with its properties, and a binary body as hex.
    rows[0].find_element(By.TAG_NAME, "button").click()
    detail = wait_for(driver, "message detail", lambda d: [e for e in d.find_elements(By.CSS_SELECTOR, "pre[data-body]") if e.is_displayed()])
    check(detail[0].text == "hello 1", detail[0].text)
    check("property region\neu" in driver.find_element(By.CSS_SELECTOR, "#messages-body tr.detail:not([hidden])").text, "properties")
    rows[2].find_element(By.TAG_NAME, "button").click()
    hexed = wait_for(driver, "hex body", lambda d: [e for e in d.find_elements(By.CSS_SELECTOR, "pre[data-body]") if e.is_displayed()][1:])
    check(hexed[0].text.startswith("00000000  00 01 02 ff"), hexed[0].text)
    # Paging by state: dead letters are none, and the filter is applied.
    driver.find_element(By.CSS_SELECTOR, "#peek-state option[value=locked]").click()
    wait_for(driver, "locked only", lambda d: len(d.find_elements(By.CSS_SELECTOR, "#messages-body tr[data-seq]")) == 1)
    driver.find_element(By.CSS_SELECTOR, "#peek-state option[value='']").click()
    wait_for(driver, "all again", lambda d: len(d.find_elements(By.CSS_SELECTOR, "#messages-body tr[data-seq]")) == 3)
    check_screenshot(shot(driver, "04-queue-1280"), 1280)
    check(not log.drain("queue"), "errors on the queue page")


def send(driver, log, state):
    driver.find_element(By.ID, "send-body").send_keys("from the console")
    driver.find_element(By.ID, "send-message-id").send_keys("console-1")
    driver.find_element(By.ID, "send-props").send_keys("source=browser")
    driver.find_element(By.ID, "send-button").click()
    note = wait_for(driver, "the send result", lambda d: text_of(d, "#send-result"))
    seq = int(note.rsplit(" ", 1)[1])
    check(seq > max(state["seqs"]), note)
    got = rpc("QueueService/Receive", {"queue": "orders", "max_messages": 10})
    mine = [m for m in got["messages"] if m.get("message_id") == "console-1"]
    check(len(mine) == 1, f"console message not received: {got}")
    m = mine[0]
    check(m["seq_number"] == seq and base64.b64decode(m["body"]) == b"from the console"
          and m.get("properties") == {"source": "browser"}, f"{m}")
    rpc("QueueService/Complete", {"queue": "orders", "seq_number": seq, "lock_token": m["lock_token"]})
    check(not log.drain("send"), "errors while sending")


def keys(driver, log, state):
    driver.find_element(By.CSS_SELECTOR, '#nav a[data-view="keys"]').click()
    key_id = state["key"]["key"]["id"]
    row = f'tr[data-key="{key_id}"]'
    wait_for(driver, "the API-made key", lambda d: "active" in text_of(d, row))
    # Create: the secret is shown once, and it works.
    driver.find_element(By.ID, "key-name").send_keys("made-in-console")
    driver.find_element(By.ID, "perm-send").click()
    driver.find_element(By.ID, "key-create").click()
    secret = wait_for(driver, "the new secret", lambda d: text_of(d, "#key-token"))
    check(secret.startswith("mqk_") and len(secret) == 68, secret)
    check(driver.find_element(By.ID, "key-copy").is_displayed(), "no copy button")
    rpc("QueueService/Send", {"queue": "orders", "messages": []}, token=secret)
    check_screenshot(shot(driver, "05-keys-created-1280"), 1280)
    # Revoke: arm, confirm, and the API refuses the key at once.
    button = driver.find_element(By.CSS_SELECTOR, row + " button.revoke")
    button.click()
    check(button.text == "Confirm revoke", button.text)
    button.click()
    wait_for(driver, "revoked", lambda d: "revoked" in text_of(d, row))
    listed = rpc("AuthService/ListKeys", {})
    mine = [k for k in listed["keys"] if k["id"] == key_id]
    check(mine and mine[0]["revoked_at_ms"] > 0, f"{listed}")
    rpc("QueueService/Stats", {"queue": "orders"}, token=state["key"]["token"], expect=401)
    check_screenshot(shot(driver, "06-keys-revoked-1280"), 1280)
    check(not log.drain("keys"), "errors on the keys page")


def topics(driver, log):
    driver.find_element(By.CSS_SELECTOR, '#nav a[data-view="topics"]').click()
    wait_for(driver, "the subscription", lambda d: "events-eu" in text_of(d, "#subs-body"))
    check('properties.region == "eu"' in text_of(driver, "#subs-body"), "filter shown")
    driver.find_element(By.CSS_SELECTOR, "#subs-body button").click()
    driver.find_element(By.ID, "filter-props").send_keys("region=eu")
    driver.find_element(By.ID, "filter-button").click()
    wait_for(driver, "a match", lambda d: "matches the sample" in text_of(d, "#filter-result")
             and "does not" not in text_of(d, "#filter-result"))
    props = driver.find_element(By.ID, "filter-props")
    props.clear()
    props.send_keys("region=us")
    driver.find_element(By.ID, "filter-button").click()
    wait_for(driver, "no match", lambda d: "does not match" in text_of(d, "#filter-result"))
    expr = driver.find_element(By.ID, "filter-expr")
    expr.clear()
    expr.send_keys("subject ==")
    driver.find_element(By.ID, "filter-button").click()
    wait_for(driver, "the compile error", lambda d: "Invalid filter" in text_of(d, "#filter-error"))
    check_screenshot(shot(driver, "07-topics-1280"), 1280)
    check(not log.drain("topics"), "errors on the topics page")


def paging(driver, log):
    # 45 messages: Peek pages of 20, 20 and 5.
    rpc("AdminService/CreateQueue", {"name": "bulk", "config": {}})
    seqs = rpc("QueueService/Send", {"queue": "bulk", "messages": [
        {"body": b64(f"m{i}")} for i in range(45)]})["seq_numbers"]
    driver.get(BASE + "/ui/#/queue/bulk")
    shown = lambda d: [int(r.get_attribute("data-seq")) for r in d.find_elements(By.CSS_SELECTOR, "#messages-body tr[data-seq]")]
    wait_for(driver, "page 1", lambda d: shown(d) == seqs[:20])
    driver.find_element(By.ID, "peek-next").click()
    wait_for(driver, "page 2", lambda d: shown(d) == seqs[20:40])
    driver.find_element(By.ID, "peek-next").click()
    wait_for(driver, "page 3", lambda d: shown(d) == seqs[40:])
    check(not driver.find_element(By.ID, "peek-next").is_enabled(), "a page after the last")
    driver.find_element(By.ID, "peek-first").click()
    wait_for(driver, "page 1 again", lambda d: shown(d) == seqs[:20])
    # 60 queues in all: the overview pages them by 50, in name order.
    for i in range(57):
        rpc("AdminService/CreateQueue", {"name": f"q{i:02d}", "config": {}})
    names = sorted(q["name"] for q in rpc("AdminService/ListQueues", {})["queues"])
    check(len(names) == 60, f"{len(names)} queues")
    driver.get(BASE + "/ui/#/")
    listed = lambda d: [r.get_attribute("data-queue") for r in d.find_elements(By.CSS_SELECTOR, "#queues-body tr[data-queue]")]
    wait_for(driver, "the first 50 queues", lambda d: listed(d) == names[:50])
    check(text_of(driver, "#queues-page") == "1–50 of 60", text_of(driver, "#queues-page"))
    driver.find_element(By.ID, "queues-next").click()
    wait_for(driver, "the last 10 queues", lambda d: listed(d) == names[50:])
    check(not driver.find_element(By.ID, "queues-next").is_enabled(), "a page after the last")
    driver.find_element(By.ID, "queues-prev").click()
    wait_for(driver, "back to the first page", lambda d: listed(d) == names[:50])
    check(not log.drain("paging"), "errors while paging")


def retype(field, text):
    # Keystrokes, so the page sees input events (clear() sends none).
    field.send_keys(Keys.CONTROL + "a")
    field.send_keys(Keys.BACKSPACE)
    if text:
        field.send_keys(text)


def reload(driver, url):
    # A new document (a change of fragment alone would keep the old one).
    driver.get(url)
    driver.refresh()


def listed_queues(d):
    return [r.get_attribute("data-queue") for r in d.find_elements(By.CSS_SELECTOR, "#queues-body tr[data-queue]")]


def find_and_sort(driver, log):
    # A queue made through the API a moment ago sorts after the first page
    # by name; typing part of its name finds it.
    needle = f"zz-needle-{os.getpid()}"
    rpc("AdminService/CreateQueue", {"name": needle, "config": {"max_delivery_count": 1}})
    sent = rpc("QueueService/Send", {"queue": needle, "messages": [{"body": b64("dead")}, {"body": b64("live")}]})
    got = rpc("QueueService/Receive", {"queue": needle, "max_messages": 1})["messages"][0]
    rpc("QueueService/Reject", {"queue": needle, "seq_number": got["seq_number"], "lock_token": got["lock_token"]})
    check(got["seq_number"] == sent["seq_numbers"][0], f"{got}")
    reload(driver, BASE + "/ui/")
    wait_for(driver, "the first page", lambda d: len(listed_queues(d)) == 50)
    check(needle not in listed_queues(driver), "the new queue is not on the first page by name")
    field = driver.find_element(By.ID, "queues-filter")
    field.send_keys("NEEDLE-")
    wait_for(driver, "the queue found by part of its name", lambda d: listed_queues(d) == [needle])
    check("of 1 (filtered from" in text_of(driver, "#queues-page"), text_of(driver, "#queues-page"))
    retype(field, "no-such-queue")
    wait_for(driver, "nothing matches", lambda d: "No queue matches" in text_of(d, "#queues-body"))
    retype(field, "")
    wait_for(driver, "every queue again", lambda d: len(listed_queues(d)) == 50)
    # Sorting by dead letters puts the only queue with one first; again, last.
    driver.find_element(By.CSS_SELECTOR, 'button[data-sort="dead_lettered"]').click()
    wait_for(driver, "dead letters first", lambda d: listed_queues(d)[:1] == [needle])
    th = driver.find_element(By.CSS_SELECTOR, 'th[data-sort-col="dead_lettered"]')
    check(th.get_attribute("aria-sort") == "descending", th.get_attribute("aria-sort"))
    driver.find_element(By.CSS_SELECTOR, 'button[data-sort="oldest"]').click()
    wait_for(driver, "oldest backlog first", lambda d: listed_queues(d)[:1] == ["orders"])
    driver.find_element(By.CSS_SELECTOR, 'button[data-sort="queue"]').click()
    wait_for(driver, "by name again", lambda d: listed_queues(d)[:1] == ["bulk"])
    check_screenshot(shot(driver, "11-queues-sorted-1280"), 1280)
    # Topics and keys filter the same way.
    driver.get(BASE + "/ui/#/topics")
    wait_for(driver, "the subscription", lambda d: "events-eu" in text_of(d, "#subs-body"))
    subs = driver.find_element(By.ID, "subs-filter")
    subs.send_keys("nothing-like-it")
    wait_for(driver, "no subscription", lambda d: "No subscription matches" in text_of(d, "#subs-body"))
    retype(subs, "EU")
    wait_for(driver, "the subscription by part of its name", lambda d: "events-eu" in text_of(d, "#subs-body"))
    driver.get(BASE + "/ui/#/keys")
    wait_for(driver, "the keys", lambda d: "ci-reader" in text_of(d, "#keys-body"))
    driver.find_element(By.ID, "keys-filter").send_keys("made-in")
    wait_for(driver, "one key", lambda d: "made-in-console" in text_of(d, "#keys-body")
             and "ci-reader" not in text_of(d, "#keys-body"))
    check(not log.drain("find and sort"), "errors while filtering")


# Wraps the page's fetch so that Observe answers with 10,000 more queues
# than the broker holds: the console's own work on a long list is what is
# measured (the broker's Observe at that size is make bench's business).
MANY_QUEUES = """
const realFetch = window.fetch.bind(window);
window.fetch = async (url, init) => {
  const res = await realFetch(url, init);
  if (!String(url).endsWith("AdminService/Observe") || !res.ok) return res;
  const obs = JSON.parse(await res.text());
  const base = obs.queues[0];
  for (let i = 0; i < 10000; i++) {
    obs.queues.push(Object.assign({}, base, { queue: "load-" + String(i).padStart(5, "0"),
      active: i % 97, dead_lettered: i % 89, oldest_message_age_ms: (i * 7919) % 100000 }));
  }
  obs.queue_count = obs.queues.length;
  return new Response(JSON.stringify(obs), { status: 200, headers: { "Content-Type": "application/json" } });
};
"""

# Times, inside the page, one filter keystroke's worth of work and one
# sort click: both handlers run synchronously, so the DOM is updated when
# they return.
TIME_FILTER = """
const field = document.getElementById("queues-filter");
const t0 = performance.now();
field.value = arguments[0];
field.dispatchEvent(new Event("input"));
return performance.now() - t0;
"""
TIME_SORT = """
const t0 = performance.now();
document.querySelector('button[data-sort="' + arguments[0] + '"]').click();
return performance.now() - t0;
"""


def many_queues(driver, log):
    script = driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": MANY_QUEUES})
    try:
        reload(driver, BASE + "/ui/")
        wait_for(driver, "10,000 queues", lambda d: "of 100" in text_of(d, "#queues-page"))
        total = int(text_of(driver, "#queues-page").split(" of ")[1].split()[0])
        check(total > 10000, text_of(driver, "#queues-page"))
        timings = {
            "filter 'load-0420'": driver.execute_script(TIME_FILTER, "load-0420"),
            "filter ''": driver.execute_script(TIME_FILTER, ""),
            "sort by dead letters": driver.execute_script(TIME_SORT, "dead_lettered"),
            "sort by oldest": driver.execute_script(TIME_SORT, "oldest"),
            "sort by name": driver.execute_script(TIME_SORT, "queue"),
        }
        for what, ms in timings.items():
            print(f"     {total} queues: {what}: {ms:.1f} ms", flush=True)
        # One frame's budget many times over: an accidental quadratic
        # (sorting or rendering every row) takes seconds at this size.
        slow = {k: v for k, v in timings.items() if v > 250}
        check(not slow, f"slow with {total} queues: {slow}")
        driver.execute_script(TIME_FILTER, "load-0420")
        wait_for(driver, "the filtered rows", lambda d: listed_queues(d) == [f"load-0420{i}" for i in range(10)])
        check_screenshot(shot(driver, "12-many-queues-1280"), 1280)
    finally:
        driver.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", {"identifier": script["identifier"]})
        reload(driver, BASE + "/ui/")
    check(not log.drain("many queues"), "errors with many queues")


def keyboard(driver, log):
    driver.get(BASE + "/ui/#/")
    wait_for(driver, "the overview", lambda d: d.find_element(By.CSS_SELECTOR, 'tr[data-queue="orders"] a'))
    # From the first element of the page, Tab alone walks the nav and the table.
    driver.execute_script("document.querySelector('.brand').focus()")
    reached = set()
    # The queue filter and the sortable column headers come before the rows.
    for _ in range(30):
        driver.switch_to.active_element.send_keys(Keys.TAB)
        el = driver.switch_to.active_element
        reached.add(el.get_attribute("href") or el.get_attribute("id") or el.text)
        if el.get_attribute("href") == BASE + "/ui/#/queue/orders":
            el.send_keys(Keys.ENTER)
            break
    wait_for(driver, "the queue page by keyboard", lambda d: text_of(d, "#queue-name") == "orders")
    check(any(r and r.endswith("#/keys") for r in reached), f"keys link not reached: {reached}")
    check(not log.drain("keyboard"), "errors while tabbing")


def phone(driver, log):
    # A phone's viewport (what DevTools' device mode does), 1:1 pixels.
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True})
    width = driver.execute_script("return window.innerWidth")
    check(width == 390, f"viewport {width}")
    for name, url, ready in [
        ("08-overview-390", "/ui/#/", 'tr[data-queue="orders"]'),
        ("09-queue-390", "/ui/#/queue/orders", "#messages-body tr[data-seq]"),
        ("10-keys-390", "/ui/#/keys", "#keys-body tr[data-key]"),
    ]:
        driver.get(BASE + url)
        wait_for(driver, name, lambda d: d.find_element(By.CSS_SELECTOR, ready).is_displayed())
        overflow = driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
        check(overflow <= 0, f"{name}: the page is {overflow}px wider than the phone")
        check_screenshot(shot(driver, name), 390)
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    check(not log.drain("phone"), "errors at phone width")


def no_errors(log):
    # Every step drained the log and refused errors; drain what is left.
    severe = log.drain("end")
    check(not severe, f"browser errors: {severe}")
    with open(log.file.name) as f:
        lines = f.read().splitlines()
    severe_lines = [line for line in lines if " SEVERE " in line]
    check(len(severe_lines) == 1 and severe_lines[0].startswith("[wrong token]"), f"{severe_lines}")


if __name__ == "__main__":
    sys.exit(main())
