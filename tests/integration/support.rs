//! Shared test helpers: a server on an ephemeral port, bounded waits, event readers.

use std::{future::Future, net::SocketAddr, sync::Arc, time::Duration};

use askgate_client::{Client, Event, Events};
use askgate_server::questions::AskRate;
use askgate_server::{
    ServerConfig,
    server::{BackendChoice, RedisConfig},
};
use askgate_testing::{RedisCluster, RedisServer};
use tokio::{net::TcpListener, sync::oneshot, task::JoinHandle};
use tokio_stream::StreamExt;

/// Upper bound of any single wait in these tests: generous for a loaded machine, short
/// enough that a hang fails with a message instead of stalling CI.
pub const WAIT: Duration = Duration::from_secs(20);

/// The Python the tests' helpers run on (tests/integration/requirements.txt):
/// `ASKGATE_TEST_PYTHON`, else the venv scripts/test.sh makes.
pub fn helper_python() -> std::path::PathBuf {
    if let Some(python) = std::env::var_os("ASKGATE_TEST_PYTHON") {
        return python.into();
    }
    let venv =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/test-venv/bin/python");
    assert!(
        venv.exists(),
        "{} is missing: scripts/test.sh makes it (python3 -m venv target/test-venv && \
         target/test-venv/bin/pip install -r tests/integration/requirements.txt)",
        venv.display()
    );
    venv
}

/// `tests/SCRIPT` on [`helper_python`], its stdout piped (its first line says it is
/// ready), its stderr the test's, killed when dropped.
pub fn helper_command(script: &str) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(helper_python());
    command
        .arg(tests_file(script))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    command
}

/// A file of the repository's tests/ directory.
pub fn tests_file(path: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests")
        .join(path)
}

/// Awaits `future` for at most [`WAIT`], failing the test with `what` otherwise.
pub async fn within<F: Future>(what: &str, future: F) -> F::Output {
    match tokio::time::timeout(WAIT, future).await {
        Ok(output) => output,
        Err(_) => panic!("timed out after {WAIT:?} waiting for {what}"),
    }
}

/// The backend a semantic test runs against: every test registered with
/// [`on_every_backend!`] runs once on each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Memory,
    /// One `redis-server`.
    Redis,
    /// A Redis Cluster of three shards.
    Cluster,
    /// The default engine, in a data directory of the server's own.
    Sqlite,
}

tokio::task_local! {
    static BACKEND: Backend;
}

impl Backend {
    /// Runs a test body with this backend: each [`TestServer`] it starts with the
    /// default (memory) backend gets this one instead, with its own `redis-server` (or
    /// cluster).
    pub async fn run(self, test: impl Future<Output = ()>) {
        BACKEND.scope(self, test).await
    }

    /// The backend of the running test (memory outside [`Backend::run`]).
    pub fn current() -> Self {
        BACKEND.try_with(|b| *b).unwrap_or(Backend::Memory)
    }
}

/// Registers the test body `async fn $name()` (defined just above, without a test
/// attribute) as four tests, `$name::memory`, `$name::sqlite`, `$name::redis` and
/// `$name::cluster`: the same function against each engine. The attribute is the
/// test's own, e.g. `#[tokio::test]`.
macro_rules! on_every_backend {
    ($(#[$attr:meta])* $name:ident) => {
        mod $name {
            $(#[$attr])*
            async fn memory() {
                crate::support::Backend::Memory.run(super::$name()).await
            }
            $(#[$attr])*
            async fn sqlite() {
                crate::support::Backend::Sqlite.run(super::$name()).await
            }
            $(#[$attr])*
            async fn redis() {
                crate::support::Backend::Redis.run(super::$name()).await
            }
            $(#[$attr])*
            async fn cluster() {
                crate::support::Backend::Cluster.run(super::$name()).await
            }
        }
    };
}

/// The Redis a test's servers share: one server or a cluster.
pub enum SharedRedis {
    Server(RedisServer),
    Cluster(RedisCluster),
}

impl SharedRedis {
    /// A config for a node on it.
    fn config(&self, config: ServerConfig) -> ServerConfig {
        let (url, cluster) = match self {
            Self::Server(redis) => (redis.url.clone(), false),
            Self::Cluster(cluster) => (cluster.url.clone(), true),
        };
        ServerConfig {
            backend: BackendChoice::Redis {
                redis: RedisConfig {
                    cluster,
                    ..RedisConfig::new(&url)
                },
                ca_file: None,
            },
            ..config
        }
    }
}

/// The defaults, except the per-tenant Ask rate limit (the load-shaped tests run
/// thousands of asks in one tenant; the limit has a test of its own) and the engine:
/// memory, which each test's engine ([`Backend::current`]) replaces.
pub fn test_config() -> ServerConfig {
    let mut config = ServerConfig {
        backend: BackendChoice::Memory,
        ..ServerConfig::default()
    };
    config.asks.rate = AskRate {
        per_second: 1_000_000,
        burst: 1_000_000,
    };
    config
}

/// An askgate server running in this process on 127.0.0.1:0. Stopped on drop.
pub struct TestServer {
    pub addr: SocketAddr,
    /// Where Prometheus metrics are served, when started with them.
    pub metrics_addr: Option<SocketAddr>,
    stop: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<anyhow::Result<()>>>,
    /// The server's own Redis (shared with its peers), when the test runs on
    /// [`Backend::Redis`]; declared last so it outlives the server's shutdown.
    redis: Option<std::sync::Arc<SharedRedis>>,
    /// The server's data directory, when the test runs on [`Backend::Sqlite`].
    _data: Option<TempDir>,
}

impl TestServer {
    pub async fn start() -> Self {
        Self::start_with(test_config()).await
    }

    pub async fn start_with(config: ServerConfig) -> Self {
        Self::start_inner(config, false).await
    }

    /// A server that also serves Prometheus metrics on an ephemeral port.
    pub async fn start_with_metrics(config: ServerConfig) -> Self {
        Self::start_inner(config, true).await
    }

    async fn start_inner(mut config: ServerConfig, metrics: bool) -> Self {
        let redis = match (&config.backend, Backend::current()) {
            (BackendChoice::Memory, Backend::Redis) => {
                Some(SharedRedis::Server(RedisServer::start().await))
            }
            (BackendChoice::Memory, Backend::Cluster) => {
                Some(SharedRedis::Cluster(RedisCluster::start(3).await))
            }
            _ => None,
        };
        if let Some(redis) = &redis {
            config = redis.config(config);
        }
        let data = match (&config.backend, Backend::current()) {
            (BackendChoice::Memory, Backend::Sqlite) => {
                let data = TempDir::new();
                config.backend = BackendChoice::Sqlite {
                    data_dir: data.0.join("data"),
                };
                Some(data)
            }
            _ => None,
        };
        let redis = redis.map(std::sync::Arc::new);
        let bind = || TcpListener::bind("127.0.0.1:0");
        let listener = bind().await.expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let metrics_listener = match metrics {
            true => Some(bind().await.expect("bind metrics")),
            false => None,
        };
        let metrics_addr = metrics_listener
            .as_ref()
            .map(|l| l.local_addr().expect("metrics addr"));
        let (stop, stopped) = oneshot::channel::<()>();
        let handle = tokio::spawn(askgate_server::server::run_with_metrics(
            listener,
            metrics_listener,
            config,
            async {
                let _ = stopped.await;
            },
        ));
        Self {
            addr,
            metrics_addr,
            stop: Some(stop),
            handle: Some(handle),
            redis,
            _data: data,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Another node sharing this server's state (its Redis), on [`Backend::Redis`];
    /// `None` on memory, whose state no other node can share.
    pub async fn start_peer(&self) -> Option<TestServer> {
        self.start_peer_with(test_config()).await
    }

    /// [`Self::start_peer`] with `config` (its backend set to this server's).
    pub async fn start_peer_with(&self, config: ServerConfig) -> Option<TestServer> {
        let redis = self.redis.clone()?;
        let mut peer = Self::start_with(redis.config(config)).await;
        peer.redis = Some(redis);
        Some(peer)
    }

    /// A new client with its own connection.
    pub async fn client(&self) -> Client {
        within("connect", Client::connect(self.url()))
            .await
            .expect("connect to the test server")
    }

    /// Triggers shutdown and waits for `run` to return.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let handle = self.handle.take().expect("running");
        within("server shutdown", handle)
            .await
            .expect("server task")
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// The next event of a subscription, within [`WAIT`].
pub async fn next_event(events: &mut Events) -> Event {
    within("the next event", events.next())
        .await
        .expect("the stream ended early")
        .expect("the stream failed")
}

/// Reads events up to and including `synced`; returns the replayed events before it.
pub async fn until_synced(events: &mut Events) -> Vec<Event> {
    let mut replay = Vec::new();
    loop {
        match next_event(events).await {
            Event::Synced { .. } => return replay,
            event => replay.push(event),
        }
    }
}

/// Reads a [`askgate_client::Following`] stream up to and including its first `synced`.
pub async fn until_synced_following(events: &mut askgate_client::Following) {
    within("synced", async {
        loop {
            match events.next().await {
                Some(Ok(Event::Synced { .. })) => return,
                Some(Ok(_)) => {}
                other => panic!("the stream stopped before synced: {other:?}"),
            }
        }
    })
    .await
}

/// Waits for the next `requested` event and returns its rpc_id.
pub async fn next_requested(events: &mut Events) -> String {
    loop {
        if let Event::Requested { requested, .. } = next_event(events).await {
            return requested.rpc_id;
        }
    }
}

/// Subscribes to a session and consumes the (empty) replay.
pub async fn subscribed(client: &mut Client, session: &str) -> Events {
    let mut events = within("subscribe", client.subscribe_session(session))
        .await
        .expect("subscribe");
    until_synced(&mut events).await;
    events
}

/// The ids of `requested` events, in order.
pub fn requested_ids(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Requested { requested, .. } => Some(requested.rpc_id.clone()),
            _ => None,
        })
        .collect()
}

/// The `askgate` binary built for these tests.
pub const ASKGATE: &str = env!("CARGO_BIN_EXE_askgate");

/// Waits for a process and returns its exit code, stdout and stderr.
pub async fn finish(child: tokio::process::Child) -> (i32, String, String) {
    finish_within(WAIT, child).await
}

/// [`finish`] with a bound of its own.
pub async fn finish_within(bound: Duration, child: tokio::process::Child) -> (i32, String, String) {
    let out = tokio::time::timeout(bound, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("timed out after {bound:?} waiting for the process to finish"))
        .expect("wait");
    (
        out.status.code().expect("exit code"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `askgate ARGS` with piped output and no stdin, killed when dropped (callers may
/// change what they need before spawning).
pub fn askgate_command(args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(ASKGATE);
    command
        .args(args)
        .env_remove("ASKGATE_ADDR")
        .env_remove("ASKGATE_SESSION")
        .env("ASKGATE_LOG", "warn")
        // Tests choose their engine: memory unless `args` say otherwise.
        .env("ASKGATE_BACKEND", "memory")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    command
}

/// Starts `askgate ARGS` with piped output; the process is killed when dropped.
pub fn askgate(args: &[&str]) -> tokio::process::Child {
    askgate_command(args).spawn().expect("spawn askgate")
}

/// `askgate serve --listen 127.0.0.1:0` as a process (the test build of the binary);
/// what the tests need on top of [`askgate_testing::ServeProcess`].
pub struct ServeProcess(askgate_testing::ServeProcess);

impl std::ops::Deref for ServeProcess {
    type Target = askgate_testing::ServeProcess;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl ServeProcess {
    pub async fn start() -> Self {
        Self::start_with(&[]).await
    }

    pub async fn start_with(extra: &[&str]) -> Self {
        Self::spawn_with(std::path::Path::new(ASKGATE), extra).await
    }

    /// `program serve …` (askgate, or a wrapper that runs it).
    pub async fn spawn_with(program: &std::path::Path, extra: &[&str]) -> Self {
        Self(
            askgate_testing::ServeProcess::spawn(program, extra)
                .await
                .expect("askgate serve starts"),
        )
    }

    /// Sends a signal by name (`TERM`, `HUP`) through the shell's builtin kill: no
    /// procps needed on the test machine.
    pub fn signal(&self, name: &str) {
        let status = std::process::Command::new("sh")
            .args(["-c", &format!("kill -{name} {}", self.pid)])
            .status()
            .expect("kill");
        assert!(status.success(), "kill -{name}");
    }

    /// `askgate serve --backend redis` nodes at `url` (`--redis-cluster` with a
    /// cluster's URL list), with the Ask rate limit lifted (see [`test_config`]) and
    /// `extra` flags.
    pub async fn redis_nodes(url: &str, cluster: bool, count: usize, extra: &[&str]) -> Vec<Self> {
        let mut args = vec!["--backend", "redis", "--redis-url", url];
        if cluster {
            args.push("--redis-cluster");
        }
        args.extend(["--ask-rate", "1000000", "--ask-burst", "1000000"]);
        args.extend(extra);
        let mut nodes = Vec::new();
        for _ in 0..count {
            nodes.push(Self::start_with(&args).await);
        }
        nodes
    }

    /// Stops it (SIGKILL) and reads its log to the end: all it logged (`None` past
    /// 8 MiB).
    pub async fn kill_and_read_log(&mut self) -> Option<String> {
        self.0.kill_and_read_log().await
    }

    /// A new client with its own connection.
    pub async fn client(&self) -> Client {
        within("connect", Client::connect(self.url.clone()))
            .await
            .expect("connect to the node")
    }

    /// Waits (within [`WAIT`]) for the process to exit; its exit code.
    pub async fn exit_code(&mut self) -> Option<i32> {
        within("serve to exit", self.0.wait())
            .await
            .expect("wait")
            .code()
    }

    /// Resident memory of the server process, in KiB.
    pub fn rss_kib(&self) -> u64 {
        self.rss().expect("VmRSS") / 1024
    }
}

/// A TCP proxy on 127.0.0.1:0 in front of one or more servers, as a Kubernetes Service
/// is to its pods: each new connection goes to the next ready upstream, round robin.
/// Taking an upstream out of the ready set (its pod went unready) leaves its open
/// connections alone; `cut` drops them all, a real connection failure for the
/// clients with the servers still up.
pub struct Balancer {
    pub addr: SocketAddr,
    ready: Arc<std::sync::Mutex<Vec<SocketAddr>>>,
    connections: Arc<std::sync::Mutex<Vec<tokio::task::AbortHandle>>>,
    accept: JoinHandle<()>,
}

impl Balancer {
    pub async fn start(upstreams: Vec<SocketAddr>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let addr = listener.local_addr().expect("the proxy's address");
        let ready = Arc::new(std::sync::Mutex::new(upstreams));
        let connections: Arc<std::sync::Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let (pool, tracked) = (ready.clone(), connections.clone());
        let accept = tokio::spawn(async move {
            let mut turn = 0usize;
            while let Ok((mut inbound, _)) = listener.accept().await {
                let upstream = {
                    let pool = pool.lock().expect("lock");
                    turn = turn.wrapping_add(1);
                    (!pool.is_empty()).then(|| pool[turn % pool.len()])
                };
                let Some(upstream) = upstream else { continue };
                let task = tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(upstream).await {
                        let _ = outbound.set_nodelay(true);
                        let _ = inbound.set_nodelay(true);
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                tracked.lock().expect("lock").push(task.abort_handle());
            }
        });
        Self {
            addr,
            ready,
            connections,
            accept,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// New connections no longer go to `upstream`.
    pub fn remove(&self, upstream: SocketAddr) {
        self.ready.lock().expect("lock").retain(|u| *u != upstream);
    }

    pub fn add(&self, upstream: SocketAddr) {
        self.ready.lock().expect("lock").push(upstream);
    }

    /// Drops every open connection (new ones are still accepted).
    pub fn cut(&self) {
        for connection in self.connections.lock().expect("lock").drain(..) {
            connection.abort();
        }
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

/// Retries `attempt` until it returns `Some`, within [`WAIT`]: for state that changes
/// asynchronously (a lease ending after its stream closed).
pub async fn eventually<T, F, Fut>(what: &str, mut attempt: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    within(what, async {
        loop {
            if let Some(value) = attempt().await {
                return value;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
}

pub use askgate_testing::TempDir;

/// One plain HTTP/1.1 request to the server (a browser's preflight, a page load).
pub async fn http1(request: http::request::Builder) -> http::Response<bytes::Bytes> {
    use http_body_util::{BodyExt, Empty};
    use hyper_util::{client::legacy::Client as HttpClient, rt::TokioExecutor};
    let client = HttpClient::builder(TokioExecutor::new()).build_http::<Empty<bytes::Bytes>>();
    let request = request.body(Empty::new()).expect("a valid request");
    let response = within("an HTTP/1.1 response", client.request(request))
        .await
        .expect("the server answers");
    let (parts, body) = response.into_parts();
    let body = body.collect().await.expect("the body").to_bytes();
    http::Response::from_parts(parts, body)
}

/// A `UserQuestions` client speaking gRPC-Web over HTTP/1.1, as the console does.
pub fn web_client(server: &TestServer) -> WebClient {
    web_client_at(&server.url())
}

/// A [`web_client`] of the server at `url`.
pub fn web_client_at(url: &str) -> WebClient {
    use hyper_util::{client::legacy::Client as HttpClient, rt::TokioExecutor};
    let http1 = HttpClient::builder(TokioExecutor::new())
        .build_http::<tonic_web::GrpcWebCall<tonic::body::Body>>();
    let service = tower::ServiceBuilder::new()
        .layer(tonic_web::GrpcWebClientLayer::new())
        .service(http1);
    let origin = url.parse().expect("the server's url");
    askgate_proto::v1::user_questions_client::UserQuestionsClient::with_origin(service, origin)
}

/// The client [`web_client`] makes.
pub type WebClient = askgate_proto::v1::user_questions_client::UserQuestionsClient<
    tonic_web::GrpcWebClientService<
        hyper_util::client::legacy::Client<
            hyper_util::client::legacy::connect::HttpConnector,
            tonic_web::GrpcWebCall<tonic::body::Body>,
        >,
    >,
>;

/// One HTTP/1.1 request to `addr` (a page, a form, an outside service's call): the
/// status and the body as text.
pub async fn request_to(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    use http_body_util::{BodyExt, Full};
    let mut request = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request
        .body(Full::new(bytes::Bytes::from(body.to_owned())))
        .expect("a valid request");
    within("an HTTP/1.1 response", async {
        let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .expect("handshake");
        tokio::spawn(connection);
        let response = sender.send_request(request).await.expect("a response");
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .expect("the body")
            .to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    })
    .await
}

/// `client` asks `ask` on a task of its own; the task's result is the call's.
pub fn in_background(
    client: &Client,
    ask: askgate_client::Ask,
) -> JoinHandle<Result<askgate_proto::v1::AskResponse, askgate_client::Error>> {
    let mut client = client.clone();
    tokio::spawn(async move { client.ask(ask).await })
}

/// The rpc_id of the first ask pending in `session`, once there is one.
pub async fn pending_rpc(client: &Client, session: &str) -> String {
    eventually("a pending ask", || {
        let mut client = client.clone();
        async move {
            let pending = client.list_pending(session).await.ok()?;
            pending.first().map(|r| r.rpc_id.clone())
        }
    })
    .await
}

/// An identity of a person (`subject`, `slack`, `telegram`, `email`).
pub fn identity(kind: &str, value: &str) -> askgate_proto::v1::Identity {
    askgate_proto::v1::Identity {
        kind: kind.into(),
        value: value.into(),
    }
}

/// Puts the person `ana` ("Ana Lima") whose one identity is the caller of a server
/// without authentication (`anonymous`): the person the linking tests link to.
pub async fn put_anonymous_ana(client: &mut Client) {
    client
        .put_person(askgate_proto::v1::Person {
            id: "ana".into(),
            display_name: "Ana Lima".into(),
            identities: vec![identity("subject", "anonymous")],
            ..Default::default()
        })
        .await
        .expect("put ana");
}

/// The identities of person `id` of the caller's tenant, as `ListPeople` shows them.
pub async fn identities_of(client: &mut Client, id: &str) -> Vec<askgate_proto::v1::Identity> {
    let people = client.list_people().await.expect("list people");
    people
        .into_iter()
        .find(|p| p.id == id)
        .map(|p| p.identities)
        .unwrap_or_default()
}
