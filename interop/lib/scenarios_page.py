"""The page of groups in a real browser (issue 50, item 3): a confluent-kafka group on a broker
with `--metrics-listen`, its page `/group/<id>` loaded by Debian's headless Chromium, and what
the rendered DOM shows (state, generation, members, the timeline's dots) compared with what the
clients themselves reported, before and after a member is SIGKILLed. A screenshot of each load
is kept in the scenario's log folder. See interop/README.md and crates/broker/README.md, "The
page of groups".
"""
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse
from html.parser import HTMLParser

from harness import Timeout, now
from scenarios import member_id_of, parts
from suite import Failed, scenario

# Where Debian's package puts it; INTEROP_CHROMIUM names another binary.
CHROMIUM_NAMES = ("chromium", "chromium-browser")
INSTALL_HINT = ("install Debian's chromium (apt-get install chromium; .ci/run installs it where "
                "/usr/bin/chromium is missing), or set INTEROP_CHROMIUM to a Chromium binary")


def chromium_exe():
    given = os.environ.get("INTEROP_CHROMIUM")
    if given:
        return given if os.access(given, os.X_OK) else None
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


class PageDom(HTMLParser):
    """What the group page shows, read from the DOM Chromium rendered: the `state` and
    `generation` fields, the members table's rows, the timeline's `gen N` labels, its member
    labels and its join/leave dots."""

    def __init__(self, html):
        super().__init__(convert_charrefs=True)
        self.state = self.generation = None
        self.members = []          # [member id, client id, host, assignment] per row
        self.gens = []             # the timeline's `gen N` labels, as ints
        self.rows = []             # the timeline's member labels ("client id member id")
        self.joins = self.leaves = 0
        self.has_svg = False
        self._field = None         # "state" | "generation" | "gen" | "member" while inside one
        self._text = []
        self._in_members = False
        self._row = None
        self._cell = None
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        cls = dict(attrs).get("class") or ""
        if tag == "b" and cls in ("state", "generation"):
            self._field, self._text = cls, []
        elif tag == "text" and cls in ("gen", "member"):
            self._field, self._text = cls, []
        elif tag == "table" and cls == "members":
            self._in_members = True
        elif self._in_members and tag == "tr":
            self._row = []
        elif self._in_members and tag == "td" and self._row is not None:
            self._cell = []
        elif tag == "svg" and "timeline" in cls.split():
            self.has_svg = True
        elif tag == "circle":
            self.joins += cls == "join"
            self.leaves += cls == "leave"

    def handle_endtag(self, tag):
        if self._field and tag in ("b", "text"):
            text = "".join(self._text).strip()
            if self._field == "state":
                self.state = text
            elif self._field == "generation":
                self.generation = int(text) if text.lstrip("-").isdigit() else text
            elif self._field == "gen":
                n = text[len("gen "):] if text.startswith("gen ") else text
                if n.lstrip("-").isdigit():
                    self.gens.append(int(n))
            elif self._field == "member":
                self.rows.append(text)
            self._field = None
        elif self._in_members and tag == "td" and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif self._in_members and tag == "tr" and self._row is not None:
            if self._row:              # the header row has th cells only
                self.members.append(self._row)
            self._row = None
        elif tag == "table" and self._in_members:
            self._in_members = False

    def handle_data(self, data):
        if self._field:
            self._text.append(data)
        if self._cell is not None:
            self._cell.append(data)

    def summary(self):
        return ("state %s, generation %s, members %s, timeline gens %s, %d join / %d leave dot(s)"
                % (self.state, self.generation, [(r[1], r[3]) for r in self.members if len(r) >= 4],
                   self.gens, self.joins, self.leaves))


class IndexDom(HTMLParser):
    """The index page `/`: the groups table's rows, each [link, group, kind, protocol, state,
    generation, members] (the link is the first cell's href)."""

    def __init__(self, html):
        super().__init__(convert_charrefs=True)
        self.groups = []
        self._in, self._row, self._cell, self._href = False, None, None, None
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        if tag == "table" and dict(attrs).get("class") == "groups":
            self._in = True
        elif self._in and tag == "tr":
            self._row, self._href = [], None
        elif self._in and tag == "td" and self._row is not None:
            self._cell = []
        elif self._in and tag == "a" and self._cell is not None:
            self._href = dict(attrs).get("href")

    def handle_endtag(self, tag):
        if self._in and tag == "td" and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif self._in and tag == "tr" and self._row is not None:
            if self._row:
                self.groups.append([self._href] + self._row)
            self._row = None
        elif self._in and tag == "table":
            self._in = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


class Browser:
    """Debian's headless Chromium, one process per load: `--dump-dom` for the rendered DOM and
    `--screenshot` of the same load, every load bounded and its process group killed if it
    runs over."""

    def __init__(self, ctx, exe):
        self.ctx, self.exe = ctx, exe
        self.loads = 0
        self.shots = []

    def load(self, url, name, timeout=30, parse=None):
        ctx = self.ctx
        shot = os.path.join(ctx.dir, name + ".png")
        profile = tempfile.mkdtemp(prefix="interop-chromium-")
        cmd = [self.exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--no-first-run", "--no-proxy-server", "--hide-scrollbars", "--user-data-dir=" + profile,
               "--window-size=1280,900", "--screenshot=" + shot, "--dump-dom", url]
        log = open(os.path.join(ctx.dir, "chromium.log"), "ab")
        log.write(("$ %s\n" % " ".join(cmd)).encode())
        log.flush()
        t0 = now()
        try:
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                                 start_new_session=True)
            try:
                out, _ = p.communicate(timeout=ctx.left(timeout))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.communicate(timeout=10)
                raise Failed("chromium did not load %s within %.0f s (log: chromium.log)" % (url, timeout))
        finally:
            log.close()
            shutil.rmtree(profile, ignore_errors=True)
        self.loads += 1
        took = now() - t0
        if p.returncode != 0:
            raise Failed("chromium exited %s loading %s (log: chromium.log)" % (p.returncode, url))
        html = out.decode(errors="replace")
        with open(os.path.join(ctx.dir, name + ".html"), "w") as f:
            f.write(html)
        if os.path.exists(shot):
            self.shots.append(shot)
        else:
            ctx.fail("chromium wrote no screenshot of %s to %s" % (url, shot))
        return (parse or PageDom)(html), took

    def load_until(self, url, name, ok, timeout):
        """Loads `url` until ok(dom) holds (the page follows the coordinator; a client may see
        its assignment a moment before or after a look of the page) or `timeout` passes; each
        load is kept as NAME-K.png/.html. Returns the last DOM and how many loads it took."""
        deadline = now() + self.ctx.left(timeout)
        k = 0
        while True:
            k += 1
            dom, took = self.load(url, "%s-%d" % (name, k))
            self.ctx.note("%s-%d: loaded in %.2f s: %s" % (name, k, took, dom.summary()))
            if ok(dom) or now() >= deadline:
                return dom, k
            self.ctx.sleep(0.5)


def owned_text(proc_owned):
    """A client's holding as the page writes an assignment: `topic(0,2), other(1)`."""
    by_topic = {}
    for t, p in proc_owned:
        by_topic.setdefault(t, []).append(p)
    return ", ".join("%s(%s)" % (t, ",".join(str(p) for p in sorted(ps))) for t, ps in sorted(by_topic.items()))


SESSION_MS, HEARTBEAT_MS = 3000, 500


@scenario("group-page-browser-confluent", topics={"pg": 4}, budget=90, own_broker=True, clients=("confluent",),
          mock_note="the mock has no --metrics-listen: no page of groups")
def group_page_browser(ctx):
    if ctx.mock:
        ctx.note("skipped: the mock serves no page of groups (--metrics-listen is the broker's)")
        return
    exe = chromium_exe()
    if not exe:
        raise Failed("no Chromium to load the group page with: " + INSTALL_HINT)
    topic, group = "pg", "pg-group <page>"      # an id the URL must percent-encode
    all_parts = parts({topic: 4})
    b = ctx.start_broker("broker", {topic: 4}, extra=["--metrics-listen", "127.0.0.1:0"])
    url = "http://%s/group/%s" % (b.metrics(ctx.left(10)), urllib.parse.quote(group, safe=""))
    browser = Browser(ctx, exe)
    kw = dict(session_ms=SESSION_MS, heartbeat_ms=HEARTBEAT_MS, bootstrap=b.address)
    prod = ctx.producer("confluent", "producer", [topic], 2400, "pg", rate=200, bootstrap=b.address)
    members = [ctx.consumer("confluent", "page-%s" % x, group, [topic], **kw) for x in "abc"]
    gen = ctx.wait_stable(members, all_parts, 30)
    ctx.require(all(ctx.owned(m) for m in members), "a member holds nothing: %s"
                % [(m.label, ctx.owned(m)) for m in members])

    def shows(dom, procs, generation):
        """What the page must show of the group the clients see: Stable in their generation,
        one row per member with the member id, client id (the worker's label), host and
        assignment each client reported, and the generation in the timeline."""
        want = sorted((member_id_of(p), p.label, owned_text(ctx.owned(p))) for p in procs)
        got = sorted((r[0], r[1], r[3]) for r in dom.members if len(r) >= 4)
        return (dom.state == "Stable" and dom.generation == generation and got == want
                and generation in dom.gens and all("127.0.0.1" in r[2] for r in dom.members))

    t0 = now()
    dom, loads = browser.load_until(url, "page-stable", lambda d: shows(d, members, gen), 10)
    ctx.note("the Stable group (generation %d) shown after %d load(s), %.1f s" % (gen, loads, now() - t0))
    ctx.check(dom.has_svg, "the page has no timeline (svg.timeline)")
    ctx.check(dom.state == "Stable", "the page shows state %r, expected Stable" % dom.state)
    ctx.check(dom.generation == gen, "the page shows generation %r, the clients hold generation %d"
              % (dom.generation, gen))
    ctx.check(gen in dom.gens, "the timeline has no `gen %d` label: %s" % (gen, dom.gens))
    shown = {r[1]: r for r in dom.members if len(r) >= 4}
    for m in members:
        row = shown.get(m.label)
        if not ctx.check(row, "the page does not show client id %s: %s" % (m.label, dom.members)):
            continue
        ctx.check(row[0] == member_id_of(m), "%s: member id %s on the page, the client reports %s"
                  % (m.label, row[0], member_id_of(m)))
        ctx.check("127.0.0.1" in row[2], "%s: host %r on the page" % (m.label, row[2]))
        ctx.check(row[3] == owned_text(ctx.owned(m)), "%s: assignment %r on the page, the client holds %r"
                  % (m.label, row[3], owned_text(ctx.owned(m))))
    ctx.check(len(dom.members) == 3, "the page shows %d members, expected 3" % len(dom.members))
    ctx.check(all(any(m.label in r for r in dom.rows) for m in members),
              "the timeline's rows %s do not name every member" % dom.rows)

    # SIGKILL one member: no LeaveGroup, its session (3 s) expires, the other two rebalance
    victim, survivors = members[0], members[1:]
    ctx.sleep(0.5)
    victim.kill()
    t_kill = victim.killed_at
    deadline = now() + ctx.left(SESSION_MS / 1000 + 15)
    while True:
        try:
            new_gen = ctx.wait_stable(survivors, all_parts, 1)
        except Timeout:   # this one-second look: not stable yet
            new_gen = None
        if new_gen is not None and new_gen > gen:
            break
        if now() >= deadline:
            raise Failed("the two survivors did not settle in a generation after %d within %.0f s of the kill: %s"
                         % (gen, SESSION_MS / 1000 + 15, [(p.label, ctx.current_generation(p), ctx.owned(p))
                                                          for p in survivors]))
    moved = now() - t_kill
    ctx.note("after SIGKILL of %s the survivors hold every partition in generation %d, %.2f s later"
             % (victim.label, new_gen, moved))
    ctx.check(moved >= (SESSION_MS - 2 * HEARTBEAT_MS) / 1000,
              "the partitions moved %.2f s after SIGKILL: before the %.1f s session could expire"
              % (moved, SESSION_MS / 1000))
    t0 = now()
    dom, loads = browser.load_until(url, "page-after-kill",
                                    lambda d: shows(d, survivors, new_gen) and d.leaves >= 1, 10)
    ctx.note("generation %d shown after %d load(s), %.1f s" % (new_gen, loads, now() - t0))
    ctx.check(dom.state == "Stable", "after the kill the page shows state %r, expected Stable" % dom.state)
    ctx.check(dom.generation == new_gen and new_gen > gen,
              "after the kill the page shows generation %r; before it %d, the survivors hold %d"
              % (dom.generation, gen, new_gen))
    ctx.check(new_gen in dom.gens, "the timeline has no `gen %d` label: %s" % (new_gen, dom.gens))
    ctx.check(len(dom.members) == 2, "after the kill the page shows %d members, expected 2: %s"
              % (len(dom.members), dom.members))
    ctx.check(victim.label not in {r[1] for r in dom.members},
              "the killed member %s is still in the members table" % victim.label)
    for m in survivors:
        ctx.check(m.label in {r[1] for r in dom.members}, "the page does not show client id %s after the kill"
                  % m.label)
    ctx.check(dom.leaves >= 1, "the timeline has no leave dot (circle.leave) after the kill")
    ctx.check(any(victim.label in r for r in dom.rows),
              "the timeline no longer has a row for the killed member: %s" % dom.rows)
    # the index `/` lists the group, linked to the page loaded above
    base = url.split("/group/", 1)[0]
    index, took = browser.load(base + "/", "index", parse=IndexDom)
    row = [g for g in index.groups if len(g) >= 7 and g[1] == group]
    ctx.note("index: loaded in %.2f s: %s" % (took, row))
    if ctx.check(row, "the index does not list %r: %s" % (group, index.groups)):
        link, _, kind, _, state, generation, count = row[0][:7]
        ctx.check(base + link == url, "the index links %r, the page was loaded at %r" % (link, url))
        ctx.check((kind, state, generation, count) == ("classic", "Stable", str(new_gen), "2"),
                  "the index shows %s, expected classic, Stable, generation %d, 2 members"
                  % ((kind, state, generation, count), new_gen))
    ctx.note("screenshots: %s" % ", ".join(os.path.basename(s) for s in browser.shots))

    ctx.wait_done(prod, 40)
    produced = ctx.produced([prod])
    ctx.wait_consumed(members, [(t, k) for t, k, _, _ in produced], 30)
    for m in survivors:
        ctx.stop(m)
    ctx.run_checker(members, [prod])
