//! TLS listeners over the wire (certificates made here with rcgen, a client written here with
//! tokio-rustls): SSL and SASL_SSL serve Kafka's protocol; each listener advertises itself;
//! client certificates are required with `--ssl-client-ca` and name the principal; a client
//! that does not speak TLS, or says nothing, is closed without harm to the others; bad
//! certificate and key files are refused at start; non-loopback listeners that do not
//! authenticate need `--allow-plaintext-remote`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::{Buf, BufMut, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{
    encode_request_header_into_buffer, Decodable, HeaderVersion, Request, StrBytes,
};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::common::*;
use broker::{BrokerConfig, ListenerSpec, SecurityProtocol, Server};

/// A certificate authority, and the files of a server certificate it signed, in a
/// temporary directory.
struct Pki {
    dir: tempfile::TempDir,
    ca: CertificateDer<'static>,
    issuer: Issuer<'static, KeyPair>,
}

/// A certificate and its key, as rustls takes them.
struct Leaf {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl Pki {
    fn new(ca_name: &str) -> Pki {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, ca_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().unwrap();
        let ca = params.self_signed(&key).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
        let pki = Pki {
            dir,
            ca: ca.der().clone(),
            issuer: Issuer::new(params, key),
        };
        let (cert, key) = pki.leaf_pem(&[("CN", "localhost")], true);
        std::fs::write(pki.path("server.pem"), cert).unwrap();
        std::fs::write(pki.path("server.key"), key).unwrap();
        pki
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A certificate signed by this authority, as PEM (certificate, key): for 127.0.0.1 and
    /// localhost when `server`, else for client authentication; the subject from `dn`.
    fn leaf_pem(&self, dn: &[(&str, &str)], server: bool) -> (String, String) {
        let names = if server {
            vec!["localhost".to_string(), "127.0.0.1".to_string()]
        } else {
            Vec::new()
        };
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name = DistinguishedName::new();
        for (kind, value) in dn {
            let kind = match *kind {
                "CN" => DnType::CommonName,
                "O" => DnType::OrganizationName,
                "OU" => DnType::OrganizationalUnitName,
                "C" => DnType::CountryName,
                other => panic!("no DN type {other}"),
            };
            params.distinguished_name.push(kind, *value);
        }
        params.extended_key_usages = vec![if server {
            ExtendedKeyUsagePurpose::ServerAuth
        } else {
            ExtendedKeyUsagePurpose::ClientAuth
        }];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    fn client(&self, dn: &[(&str, &str)]) -> Leaf {
        let (cert, key) = self.leaf_pem(dn, false);
        let chain = rustls::pki_types::pem::PemObject::pem_slice_iter(cert.as_bytes())
            .collect::<Result<Vec<CertificateDer<'static>>, _>>()
            .unwrap();
        let key = PrivatePkcs8KeyDer::from(
            rustls::pki_types::pem::PemObject::from_pem_slice(key.as_bytes())
                .map(|k: PrivatePkcs8KeyDer<'static>| k.secret_pkcs8_der().to_vec())
                .unwrap(),
        );
        Leaf {
            chain,
            key: PrivateKeyDer::Pkcs8(key),
        }
    }

    /// A TLS connection presenting a certificate of this authority for `O=acme, CN=<cn>`.
    async fn connect_as(&self, addr: SocketAddr, cn: &str) -> TlsClient {
        let leaf = self.client(&[("O", "acme"), ("CN", cn)]);
        TlsClient::connect(addr, &self.ca, Some(leaf))
            .await
            .unwrap()
    }

    /// A broker config whose first listener is `protocol` on a free loopback port, with this
    /// authority's server certificate (and, with `client_ca`, client certificates required).
    fn config(&self, protocol: SecurityProtocol, client_ca: bool) -> BrokerConfig {
        BrokerConfig {
            security_protocol: protocol,
            ssl_certificate: Some(self.path("server.pem")),
            ssl_key: Some(self.path("server.key")),
            ssl_client_ca: client_ca.then(|| self.path("ca.pem")),
            ..config()
        }
    }
}

/// A Kafka client over TLS: one request at a time, every wait bounded.
struct TlsClient {
    stream: TlsStream<TcpStream>,
    correlation: i32,
}

impl TlsClient {
    /// Connects and completes the handshake, trusting `ca`, presenting `cert` if given.
    async fn connect(
        addr: SocketAddr,
        ca: &CertificateDer<'static>,
        cert: Option<Leaf>,
    ) -> std::io::Result<TlsClient> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        let config = match cert {
            None => builder.with_no_client_auth(),
            Some(leaf) => builder.with_client_auth_cert(leaf.chain, leaf.key).unwrap(),
        };
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = bounded("connect", TcpStream::connect(addr)).await?;
        let name = ServerName::try_from("localhost").unwrap();
        let stream = bounded("TLS handshake", connector.connect(name, tcp)).await?;
        Ok(TlsClient {
            stream,
            correlation: 0,
        })
    }

    /// Sends `request` at `version` and reads its answer; an error if the broker closes
    /// the connection (or the TLS session fails) instead.
    async fn call<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> std::io::Result<R::Response> {
        self.correlation += 1;
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(StrBytes::from_static_str("tls-test")));
        let mut frame = BytesMut::new();
        frame.put_i32(0);
        encode_request_header_into_buffer(&mut frame, &header).unwrap();
        request.encode(&mut frame, version).unwrap();
        let size = i32::try_from(frame.len() - 4).unwrap();
        frame[..4].copy_from_slice(&size.to_be_bytes());
        bounded("write", async {
            self.stream.write_all(&frame).await?;
            self.stream.flush().await
        })
        .await?;
        let mut len = [0u8; 4];
        bounded("read", self.stream.read_exact(&mut len)).await?;
        let mut body = vec![0u8; usize::try_from(i32::from_be_bytes(len)).unwrap()];
        bounded("read", self.stream.read_exact(&mut body)).await?;
        let mut body = bytes::Bytes::from(body);
        let header =
            ResponseHeader::decode(&mut body, R::Response::header_version(version)).unwrap();
        assert_eq!(header.correlation_id, self.correlation);
        let response = R::Response::decode(&mut body, version).unwrap();
        assert!(!body.has_remaining(), "bytes trail the response");
        Ok(response)
    }
}

fn metadata() -> MetadataRequest {
    MetadataRequest::default().with_topics(None)
}

/// The broker Metadata v4 names: (host, port).
async fn advertised(c: &mut TlsClient) -> (String, i32) {
    let r = c.call(&metadata(), 4).await.expect("Metadata over TLS");
    assert_eq!(r.brokers.len(), 1);
    (r.brokers[0].host.to_string(), r.brokers[0].port)
}

#[tokio::test]
async fn an_ssl_listener_serves_kafka_over_tls() {
    let pki = Pki::new("test-ca");
    let broker = TestBroker::with(pki.config(SecurityProtocol::Ssl, false)).await;
    let mut c = TlsClient::connect(broker.addr, &pki.ca, None)
        .await
        .unwrap();
    let versions = c.call(&ApiVersionsRequest::default(), 3).await.unwrap();
    assert_eq!(versions.error_code, 0);
    assert!(!versions.api_keys.is_empty());
    let r = c.call(&metadata(), 4).await.unwrap();
    assert_eq!(
        (r.brokers[0].host.to_string(), r.brokers[0].port),
        ("127.0.0.1".to_string(), i32::from(broker.addr.port()))
    );
    assert!(r
        .topics
        .iter()
        .any(|t| t.name.as_ref().map(|n| n.as_str()) == Some("t")));
    // a commit and its fetch: a whole exchange, with a response larger than a TLS record
    // would need for ApiVersions alone
    let commit = c
        .call(&commit("g", "", -1, &[("t", 0, 42)]), 2)
        .await
        .unwrap();
    assert_eq!(commit_codes(&commit), vec![0]);
    let fetched_back = c.call(&offset_fetch("g", &[0]), 1).await.unwrap();
    assert_eq!(fetched(&fetched_back), vec![42]);
    broker.stop().await.unwrap();
}

#[tokio::test]
async fn each_listener_advertises_itself_to_the_clients_that_came_through_it() {
    let pki = Pki::new("test-ca");
    let broker = TestBroker::with(BrokerConfig {
        listeners: vec!["SSL://127.0.0.1:0".parse::<ListenerSpec>().unwrap()],
        ..pki.config(SecurityProtocol::Plaintext, false)
    })
    .await;
    assert_eq!(broker.addrs.len(), 2);
    let (plain, tls) = (broker.addrs[0], broker.addrs[1]);
    assert_eq!(plain.0, SecurityProtocol::Plaintext);
    assert_eq!(tls.0, SecurityProtocol::Ssl);
    let mut c = TlsClient::connect(tls.1, &pki.ca, None).await.unwrap();
    assert_eq!(advertised(&mut c).await.1, i32::from(tls.1.port()));
    let coordinator = c
        .call(
            &FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("g")),
            1,
        )
        .await
        .unwrap();
    assert_eq!(coordinator.port, i32::from(tls.1.port()));
    let mut p = Client::connect(plain.1).await;
    let r = p.call(&metadata(), 4).await;
    assert_eq!(r.brokers[0].port, i32::from(plain.1.port()));
    // the broker's configs list both
    let described = p
        .call(
            &DescribeConfigsRequest::default().with_resources(vec![
                describe_configs_request::DescribeConfigsResource::default()
                    .with_resource_type(4)
                    .with_resource_name(StrBytes::from_static_str("0"))
                    .with_configuration_keys(Some(vec![StrBytes::from_static_str(
                        "advertised.listeners",
                    )])),
            ]),
            1,
        )
        .await;
    let value = described.results[0].configs[0]
        .value
        .as_ref()
        .unwrap()
        .to_string();
    assert_eq!(
        value,
        format!(
            "PLAINTEXT://127.0.0.1:{},SSL://127.0.0.1:{}",
            plain.1.port(),
            tls.1.port()
        )
    );
    broker.stop().await.unwrap();
}

#[tokio::test]
async fn a_client_that_does_not_speak_tls_or_says_nothing_is_closed_and_harms_no_one() {
    let pki = Pki::new("test-ca");
    let broker = TestBroker::with(BrokerConfig {
        request_timeout_ms: 300,
        ..pki.config(SecurityProtocol::Ssl, false)
    })
    .await;
    // Kafka's protocol in the clear on a TLS port: not a ClientHello
    let mut clear = Client::connect(broker.addr).await;
    let (_, frame) = clear.request_frame(&ApiVersionsRequest::default(), 0);
    clear.send_raw(&frame).await;
    assert!(
        clear.is_closed().await,
        "a plaintext request is answered on TLS"
    );
    // a socket that never starts the handshake is closed after the request timeout
    let mut silent = Client::connect(broker.addr).await;
    assert!(silent.is_closed().await, "a silent socket stays open");
    // the listener still serves
    let mut c = TlsClient::connect(broker.addr, &pki.ca, None)
        .await
        .unwrap();
    advertised(&mut c).await;
    broker.stop().await.unwrap();
}

#[tokio::test]
async fn with_a_client_ca_only_certificates_it_signed_get_in() {
    let pki = Pki::new("test-ca");
    let broker = TestBroker::with(pki.config(SecurityProtocol::Ssl, true)).await;
    // signed by the authority: served
    let leaf = pki.client(&[("O", "acme"), ("CN", "orders-app")]);
    let mut c = TlsClient::connect(broker.addr, &pki.ca, Some(leaf))
        .await
        .unwrap();
    advertised(&mut c).await;
    // no certificate, or one another authority signed: refused (with TLS 1.3 the client's
    // handshake ends before the server has judged its certificate; the first exchange fails)
    let other = Pki::new("other-ca");
    for cert in [None, Some(other.client(&[("CN", "orders-app")]))] {
        let refused = match TlsClient::connect(broker.addr, &pki.ca, cert).await {
            Err(_) => true,
            Ok(mut c) => c.call(&metadata(), 4).await.is_err(),
        };
        assert!(
            refused,
            "a client without a certificate of the authority is served"
        );
    }
    let mut c = TlsClient::connect(broker.addr, &pki.ca, Some(pki.client(&[("CN", "second")])))
        .await
        .unwrap();
    advertised(&mut c).await;
    broker.stop().await.unwrap();
}

#[tokio::test]
async fn sasl_ssl_authenticates_with_sasl_inside_tls() {
    use std::io::Write as _;
    use std::os::unix::fs::PermissionsExt;
    let pki = Pki::new("test-ca");
    let users = pki.path("users");
    std::fs::File::create(&users)
        .unwrap()
        .write_all(b"alice:alice-secret\n")
        .unwrap();
    std::fs::set_permissions(&users, std::fs::Permissions::from_mode(0o600)).unwrap();
    let broker = TestBroker::with(BrokerConfig {
        users_file: Some(users),
        connection_failed_authentication_delay_ms: 10,
        ..pki.config(SecurityProtocol::SaslSsl, false)
    })
    .await;
    let plain = |user: &str, password: &str| {
        SaslAuthenticateRequest::default()
            .with_auth_bytes(bytes::Bytes::from(format!("\0{user}\0{password}")))
    };
    let handshake =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
    // before authenticating, only ApiVersions and SASL: Metadata closes the connection
    let mut c = TlsClient::connect(broker.addr, &pki.ca, None)
        .await
        .unwrap();
    assert!(c.call(&metadata(), 4).await.is_err());
    // the right password: served
    let mut c = TlsClient::connect(broker.addr, &pki.ca, None)
        .await
        .unwrap();
    assert_eq!(c.call(&handshake, 1).await.unwrap().error_code, 0);
    let r = c.call(&plain("alice", "alice-secret"), 2).await.unwrap();
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    advertised(&mut c).await;
    // a wrong one: SASL_AUTHENTICATION_FAILED, then closed
    let mut c = TlsClient::connect(broker.addr, &pki.ca, None)
        .await
        .unwrap();
    assert_eq!(c.call(&handshake, 1).await.unwrap().error_code, 0);
    let r = c.call(&plain("alice", "wrong"), 2).await.unwrap();
    assert_eq!(r.error_code, 58);
    assert!(
        c.call(&metadata(), 4).await.is_err(),
        "served after a failure"
    );
    broker.stop().await.unwrap();
}

#[tokio::test]
async fn bad_certificate_and_key_files_are_refused_at_start_naming_the_setting() {
    let pki = Pki::new("test-ca");
    let garbage = pki.path("garbage.pem");
    std::fs::write(&garbage, "not a PEM file\n").unwrap();
    let (other_cert, _) = pki.leaf_pem(&[("CN", "other")], true);
    let other = pki.path("other.pem");
    std::fs::write(&other, other_cert).unwrap();
    let ssl = pki.config(SecurityProtocol::Ssl, true);
    let cases = [
        (
            BrokerConfig {
                ssl_certificate: Some(pki.path("missing.pem")),
                ..ssl.clone()
            },
            "ssl-certificate",
            "cannot read it",
        ),
        (
            BrokerConfig {
                ssl_certificate: Some(garbage.clone()),
                ..ssl.clone()
            },
            "ssl-certificate",
            "no CERTIFICATE",
        ),
        (
            BrokerConfig {
                ssl_key: Some(garbage.clone()),
                ..ssl.clone()
            },
            "ssl-key",
            "no PRIVATE KEY",
        ),
        (
            BrokerConfig {
                ssl_certificate: Some(other),
                ..ssl.clone()
            },
            "ssl-key",
            "does not go with --ssl-certificate",
        ),
        (
            BrokerConfig {
                ssl_client_ca: Some(garbage),
                ..ssl.clone()
            },
            "ssl-client-ca",
            "no CERTIFICATE",
        ),
    ];
    for (config, setting, expect) in cases {
        let err = bounded("bind", Server::bind(config)).await.unwrap_err();
        assert_eq!(err.code(), "INVALID_CONFIG");
        let message = err.to_string();
        assert!(
            message.contains(setting) && message.contains(expect),
            "{message}"
        );
    }
}

/// The binary: a remote listener that does not authenticate needs --allow-plaintext-remote
/// (refused with the flag's name, exit non-zero); with it the broker starts and warns. And
/// an SSL connection with a client certificate is logged with its principal.
#[tokio::test]
async fn the_binary_guards_remote_listeners_and_logs_certificate_principals() {
    let refused = bounded(
        "broker exit",
        tokio::process::Command::new(env!("CARGO_BIN_EXE_broker"))
            .args(["--listen", "0.0.0.0:0"])
            .output(),
    )
    .await
    .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("--allow-plaintext-remote"), "{stderr}");

    let pki = Pki::new("test-ca");
    let log = pki.path("broker.log");
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_broker"));
    command
        .args(["--listen", "SSL://127.0.0.1:0", "--listen", "0.0.0.0:0"])
        .arg("--allow-plaintext-remote")
        .arg("--ssl-certificate")
        .arg(pki.path("server.pem"))
        .arg("--ssl-key")
        .arg(pki.path("server.key"))
        .arg("--ssl-client-ca")
        .arg(pki.path("ca.pem"))
        .env("RUST_LOG", "info")
        .stderr(std::fs::File::create(&log).unwrap());
    let (mut child, addr, mut lines) = spawn_listening(command).await;
    let second = bounded("second listening line", lines.next_line())
        .await
        .unwrap()
        .unwrap();
    assert!(
        second.starts_with("listening on PLAINTEXT://0.0.0.0:"),
        "{second}"
    );
    let mut c = TlsClient::connect(
        addr,
        &pki.ca,
        Some(pki.client(&[("O", "acme"), ("CN", "orders-app")])),
    )
    .await
    .unwrap();
    advertised(&mut c).await;
    drop(c);
    let principal = "User:CN=orders-app,O=acme";
    bounded("the connection's close logged", async {
        loop {
            let text = std::fs::read_to_string(&log).unwrap();
            if text.contains("connection closed") && text.contains(principal) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("--allow-plaintext-remote"), "{text}");
    child.start_kill().unwrap();
    bounded("broker exit", child.wait()).await.unwrap();
}

/// The principal of a client certificate is what the ACLs see: a super user named by its
/// certificate's subject grants READ to another certificate's subject, which may then commit;
/// a third certificate may not.
#[tokio::test]
async fn a_client_certificates_subject_is_the_principal_the_acls_judge() {
    let pki = Pki::new("test-ca");
    let broker = TestBroker::with(BrokerConfig {
        authorizer: true,
        super_users: vec!["User:CN=admin".into()],
        ..pki.config(SecurityProtocol::Ssl, true)
    })
    .await;
    // the super user's subject is CN=admin,O=acme: not the configured User:CN=admin
    let mut almost = pki.connect_as(broker.addr, "admin").await;
    let creation = |kind: i8, name: &str, principal: &str| {
        create_acls_request::AclCreation::default()
            .with_resource_type(kind)
            .with_resource_name(StrBytes::from_string(name.to_string()))
            .with_resource_pattern_type(3)
            .with_principal(StrBytes::from_string(principal.to_string()))
            .with_host(StrBytes::from_static_str("*"))
            .with_operation(3)
            .with_permission_type(3)
    };
    let grant = CreateAclsRequest::default().with_creations(vec![
        creation(3, "g", "User:CN=orders-app,O=acme"),
        creation(2, "t", "User:CN=orders-app,O=acme"),
    ]);
    let refused = almost.call(&grant, 3).await.unwrap();
    assert_eq!(
        refused.results[0].error_code, 31,
        "User:CN=admin,O=acme is no super user"
    );
    drop(almost);
    let broker = {
        drop(broker);
        TestBroker::with(BrokerConfig {
            authorizer: true,
            super_users: vec!["User:CN=admin,O=acme".into()],
            ..pki.config(SecurityProtocol::Ssl, true)
        })
        .await
    };
    let mut admin = pki.connect_as(broker.addr, "admin").await;
    let granted = admin.call(&grant, 3).await.unwrap();
    assert_eq!(
        granted
            .results
            .iter()
            .map(|r| r.error_code)
            .collect::<Vec<_>>(),
        vec![0, 0]
    );
    let mut app = pki.connect_as(broker.addr, "orders-app").await;
    let r = app
        .call(&commit("g", "", -1, &[("t", 0, 5)]), 2)
        .await
        .unwrap();
    assert_eq!(commit_codes(&r), vec![0]);
    let mut other = pki.connect_as(broker.addr, "billing").await;
    let r = other
        .call(&commit("g", "", -1, &[("t", 0, 0)]), 2)
        .await
        .unwrap();
    assert_eq!(commit_codes(&r), vec![30]);
    let fetched_back = admin.call(&offset_fetch("g", &[0]), 1).await.unwrap();
    assert_eq!(fetched(&fetched_back), vec![5]);
    broker.stop().await.unwrap();
}

/// The SASL PLAIN exchange (SaslHandshake v1, SaslAuthenticate v2) as `user`: its error code.
fn plain_login(user: &str, password: &str) -> (SaslHandshakeRequest, SaslAuthenticateRequest) {
    (
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
        SaslAuthenticateRequest::default()
            .with_auth_bytes(bytes::Bytes::from(format!("\0{user}\0{password}"))),
    )
}

/// One ACL creation: READ on a LITERAL resource of `kind` for `principal`.
fn read_acl(kind: i8, name: &str, principal: &str) -> CreateAclsRequest {
    CreateAclsRequest::default().with_creations(vec![create_acls_request::AclCreation::default()
        .with_resource_type(kind)
        .with_resource_name(StrBytes::from_string(name.to_string()))
        .with_resource_pattern_type(3)
        .with_principal(StrBytes::from_string(principal.to_string()))
        .with_host(StrBytes::from_static_str("*"))
        .with_operation(3)
        .with_permission_type(3)])
}

/// A users file (PLAIN) beside the authority's files.
fn users_file(pki: &Pki) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let users = pki.path("users");
    std::fs::write(&users, "alice:alice-secret\n").unwrap();
    std::fs::set_permissions(&users, std::fs::Permissions::from_mode(0o600)).unwrap();
    users
}

/// Three listeners in one broker as Kafka runs them (issue: SASL_SSL clients were refused for
/// lack of a certificate that only the SSL listener asks for): SASL_SSL authenticates by SASL
/// without a client certificate although `--ssl-client-ca` is given; SSL requires one;
/// SASL_PLAINTEXT beside them. Each listener advertises itself, as the broker and as the
/// controller, in Metadata and DescribeCluster; ACLs are created over SSL by a certificate
/// super user and refused to another certificate.
#[tokio::test]
async fn sasl_ssl_without_certificates_beside_mutual_tls_and_sasl_plaintext() {
    let pki = Pki::new("test-ca");
    let broker = TestBroker::with(BrokerConfig {
        listeners: vec![
            "SASL_PLAINTEXT://127.0.0.1:0".parse().unwrap(),
            "SSL://127.0.0.1:0".parse().unwrap(),
        ],
        users_file: Some(users_file(&pki)),
        authorizer: true,
        super_users: vec!["User:alice".into(), "User:CN=admin,O=acme".into()],
        connection_failed_authentication_delay_ms: 10,
        ..pki.config(SecurityProtocol::SaslSsl, true)
    })
    .await;
    let port = |p: SecurityProtocol| {
        let a = broker.addrs.iter().find(|(q, _)| *q == p).unwrap().1;
        (a, i32::from(a.port()))
    };
    let (sasl_ssl, sasl_ssl_port) = port(SecurityProtocol::SaslSsl);
    let (sasl_plain, sasl_plain_port) = port(SecurityProtocol::SaslPlaintext);
    let (ssl, ssl_port) = port(SecurityProtocol::Ssl);
    let (handshake, login) = plain_login("alice", "alice-secret");

    // SASL_SSL, no client certificate: the handshake passes, SASL authenticates
    let mut c = TlsClient::connect(sasl_ssl, &pki.ca, None)
        .await
        .expect("a SASL_SSL client without a certificate completes the TLS handshake");
    assert_eq!(c.call(&handshake, 1).await.unwrap().error_code, 0);
    assert_eq!(c.call(&login, 2).await.unwrap().error_code, 0);
    let r = c.call(&metadata(), 12).await.unwrap();
    assert_eq!(r.brokers[0].port, sasl_ssl_port);
    assert_eq!(r.controller_id, r.brokers[0].node_id);

    // SASL_PLAINTEXT
    let mut p = Client::connect(sasl_plain).await;
    assert_eq!(p.call(&handshake, 1).await.error_code, 0);
    assert_eq!(p.call(&login, 2).await.error_code, 0);
    let r = p.call(&metadata(), 12).await;
    assert_eq!(r.brokers[0].port, sasl_plain_port);

    // SSL: a certificate is required
    let refused = match TlsClient::connect(ssl, &pki.ca, None).await {
        Err(_) => true,
        Ok(mut c) => c.call(&metadata(), 4).await.is_err(),
    };
    assert!(refused, "an SSL client without a certificate is served");
    let mut admin = pki.connect_as(ssl, "admin").await;
    let r = admin.call(&metadata(), 12).await.unwrap();
    assert_eq!(
        (r.brokers[0].host.to_string(), r.brokers[0].port),
        ("127.0.0.1".to_string(), ssl_port)
    );
    assert_eq!(r.controller_id, r.brokers[0].node_id, "the controller");
    for endpoint_type in [1, 2] {
        let d = admin
            .call(
                &DescribeClusterRequest::default().with_endpoint_type(endpoint_type),
                1,
            )
            .await
            .unwrap();
        assert_eq!(d.error_code, 0);
        assert_eq!(d.brokers[0].port, ssl_port, "endpoint type {endpoint_type}");
        assert_eq!(d.controller_id, d.brokers[0].broker_id);
    }
    // the ACL APIs the admin client sends to the controller, over SSL
    let created = admin
        .call(&read_acl(2, "t", "User:CN=app,O=acme"), 3)
        .await
        .unwrap();
    assert_eq!(created.results[0].error_code, 0);
    let mut app = pki.connect_as(ssl, "app").await;
    let refused = app
        .call(&read_acl(2, "t", "User:CN=app,O=acme"), 3)
        .await
        .unwrap();
    assert_eq!(
        refused.results[0].error_code, 31,
        "CLUSTER_AUTHORIZATION_FAILED"
    );
    broker.stop().await.unwrap();
}

/// `--listener-ssl-client-auth`: SASL_SSL=required asks SASL_SSL clients for a certificate;
/// SSL=requested lets an SSL client in without one (as User:ANONYMOUS) and names a client that
/// presents one by its subject; a certificate of another authority is refused even there.
#[tokio::test]
async fn client_authentication_is_set_per_listener() {
    let pki = Pki::new("test-ca");
    let broker = TestBroker::with(BrokerConfig {
        listeners: vec!["SSL://127.0.0.1:0".parse().unwrap()],
        users_file: Some(users_file(&pki)),
        authorizer: true,
        super_users: vec!["User:CN=admin,O=acme".into()],
        listener_ssl_client_auth: vec![
            "SASL_SSL=required".parse().unwrap(),
            "ssl=requested".parse().unwrap(),
        ],
        ..pki.config(SecurityProtocol::SaslSsl, true)
    })
    .await;
    let (sasl_ssl, ssl) = (broker.addrs[0].1, broker.addrs[1].1);
    // SASL_SSL=required: without a certificate, refused
    let refused = match TlsClient::connect(sasl_ssl, &pki.ca, None).await {
        Err(_) => true,
        Ok(mut c) => c.call(&ApiVersionsRequest::default(), 3).await.is_err(),
    };
    assert!(
        refused,
        "SASL_SSL=required served a client without a certificate"
    );
    // with one, SASL still decides who it is
    let mut c = pki.connect_as(sasl_ssl, "admin").await;
    let (handshake, login) = plain_login("alice", "alice-secret");
    assert!(
        c.call(&metadata(), 4).await.is_err(),
        "a certificate is no SASL login"
    );
    let mut c = pki.connect_as(sasl_ssl, "admin").await;
    assert_eq!(c.call(&handshake, 1).await.unwrap().error_code, 0);
    assert_eq!(c.call(&login, 2).await.unwrap().error_code, 0);
    // alice is no super user: her ACL creation is refused (the certificate's subject is not
    // her principal)
    let r = c.call(&read_acl(2, "t", "User:x"), 3).await.unwrap();
    assert_eq!(r.results[0].error_code, 31);
    // SSL=requested: in without a certificate, as User:ANONYMOUS (no super user)
    let mut anonymous = TlsClient::connect(ssl, &pki.ca, None).await.unwrap();
    let r = anonymous
        .call(&read_acl(2, "t", "User:x"), 3)
        .await
        .unwrap();
    assert_eq!(r.results[0].error_code, 31);
    // with one, its subject
    let mut admin = pki.connect_as(ssl, "admin").await;
    let r = admin.call(&read_acl(2, "t", "User:x"), 3).await.unwrap();
    assert_eq!(r.results[0].error_code, 0);
    // a certificate of another authority: refused
    let other = Pki::new("other-ca");
    let refused = match TlsClient::connect(ssl, &pki.ca, Some(other.client(&[("CN", "x")]))).await {
        Err(_) => true,
        Ok(mut c) => c.call(&metadata(), 4).await.is_err(),
    };
    assert!(refused, "a certificate of another authority is served");
    broker.stop().await.unwrap();
}

/// `--advertised-listeners`: the clients of the named listener are told its host and port
/// (the host name the server certificate names, here), the others their bound address.
#[tokio::test]
async fn an_advertised_listener_is_what_its_clients_are_told() {
    let pki = Pki::new("test-ca");
    let broker = TestBroker::with(BrokerConfig {
        listeners: vec!["SSL://127.0.0.1:0".parse().unwrap()],
        advertised_listeners: vec!["SSL://localhost:19093".parse().unwrap()],
        ..pki.config(SecurityProtocol::Plaintext, false)
    })
    .await;
    let (plain, ssl) = (broker.addrs[0].1, broker.addrs[1].1);
    let mut c = TlsClient::connect(ssl, &pki.ca, None).await.unwrap();
    assert_eq!(advertised(&mut c).await, ("localhost".to_string(), 19093));
    let coordinator = c
        .call(
            &FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("g")),
            1,
        )
        .await
        .unwrap();
    assert_eq!(
        (coordinator.host.to_string(), coordinator.port),
        ("localhost".to_string(), 19093)
    );
    let mut p = Client::connect(plain).await;
    let r = p.call(&metadata(), 4).await;
    assert_eq!(
        (r.brokers[0].host.to_string(), r.brokers[0].port),
        ("127.0.0.1".to_string(), i32::from(plain.port()))
    );
    broker.stop().await.unwrap();
}

/// The per-listener settings are checked at start, naming the setting.
#[tokio::test]
async fn per_listener_settings_that_cannot_hold_are_refused_at_start() {
    let pki = Pki::new("test-ca");
    let ssl = || BrokerConfig {
        listeners: vec!["SASL_SSL://127.0.0.1:0".parse().unwrap()],
        users_file: Some(users_file(&pki)),
        ..pki.config(SecurityProtocol::Ssl, false)
    };
    let cases = [
        (
            BrokerConfig {
                listener_ssl_client_auth: vec!["SSL=required".parse().unwrap()],
                ..ssl()
            },
            "SSL=required needs --ssl-client-ca",
        ),
        (
            BrokerConfig {
                listeners: vec![],
                users_file: None,
                ssl_client_ca: Some(pki.path("ca.pem")),
                listener_ssl_client_auth: vec!["SASL_SSL=requested".parse().unwrap()],
                ..ssl()
            },
            "no SASL_SSL listener is configured",
        ),
        (
            BrokerConfig {
                security_protocol: SecurityProtocol::SaslSsl,
                listeners: vec![],
                ssl_client_ca: Some(pki.path("ca.pem")),
                ..ssl()
            },
            "no listener asks for client certificates",
        ),
        (
            BrokerConfig {
                advertised_listeners: vec!["SASL_PLAINTEXT://h:1".parse().unwrap()],
                ..ssl()
            },
            "no SASL_PLAINTEXT listener is configured",
        ),
        (
            BrokerConfig {
                listeners: vec!["SSL://127.0.0.1:0".parse().unwrap()],
                users_file: None,
                advertised_listeners: vec!["SSL://h:1".parse().unwrap()],
                ..ssl()
            },
            "SSL names 2 listeners",
        ),
    ];
    for (config, want) in cases {
        let Err(err) = Server::bind(config).await else {
            panic!("started, wanted {want:?}");
        };
        assert!(err.to_string().contains(want), "{err} (wanted {want:?})");
    }
    for (bad, want) in [
        ("PLAINTEXT=required", "PLAINTEXT is not a TLS listener"),
        ("SSL=maybe", "`maybe` is not a setting"),
        ("SSL", "no `=`"),
    ] {
        let err = bad.parse::<broker::ListenerClientAuth>().unwrap_err();
        assert!(err.to_string().contains(want), "{bad}: {err}");
    }
    for (bad, want) in [
        ("SSL://localhost:0", "is not a port"),
        ("SSL://:9093", "is not a host"),
        ("HTTP://h:1", "names no listener"),
    ] {
        let err = bad.parse::<broker::AdvertisedListener>().unwrap_err();
        assert!(err.to_string().contains(want), "{bad}: {err}");
    }
}

/// `--queued-max-request-bytes` over TLS: a large frame and a small one written together
/// (the small one's bytes decrypted with the large one's) are both read and answered in
/// order: the read that stops at a frame's end (with a pool) leaves the next frame's bytes
/// in the TLS session, and they are read once it has memory.
#[tokio::test]
async fn a_pool_of_frame_memory_serves_pipelined_frames_over_tls() {
    let pki = Pki::new("test-ca");
    let broker = TestBroker::with(BrokerConfig {
        max_frame_bytes: 1024 * 1024,
        queued_max_request_bytes: 1024 * 1024,
        ..pki.config(SecurityProtocol::Ssl, false)
    })
    .await;
    let mut c = TlsClient::connect(broker.addr, &pki.ca, None)
        .await
        .unwrap();
    // ApiVersions v0 (header v1: key, version, correlation, client id; no body), the first
    // padded to 700 KiB (the broker ignores bytes after a request's body).
    let request = |correlation: i32, size: usize| {
        let mut frame = (size as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(&[0, 18, 0, 0]);
        frame.extend_from_slice(&correlation.to_be_bytes());
        frame.extend_from_slice(&[0, 1, b'q']);
        frame.resize(4 + size, 0);
        frame
    };
    let mut both = request(1, 700 * 1024);
    both.extend_from_slice(&request(2, 11));
    bounded("write", async {
        c.stream.write_all(&both).await?;
        c.stream.flush().await
    })
    .await
    .unwrap();
    for want in [1, 2] {
        let mut len = [0u8; 4];
        bounded("read", c.stream.read_exact(&mut len))
            .await
            .unwrap();
        let mut body = vec![0u8; usize::try_from(i32::from_be_bytes(len)).unwrap()];
        bounded("read", c.stream.read_exact(&mut body))
            .await
            .unwrap();
        let mut body = bytes::Bytes::from(body);
        let header = ResponseHeader::decode(&mut body, 0).unwrap();
        assert_eq!(header.correlation_id, want);
        let r = ApiVersionsResponse::decode(&mut body, 0).unwrap();
        assert_eq!(r.error_code, 0);
    }
    let versions = c.call(&ApiVersionsRequest::default(), 3).await.unwrap();
    assert_eq!(versions.error_code, 0);
    broker.stop().await.unwrap();
}
