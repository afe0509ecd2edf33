//! TLS and mTLS end to end with certificates generated at test time (rcgen): a client
//! that trusts the CA gets through, mTLS refuses a client without a certificate, and
//! plaintext to a TLS port fails cleanly instead of hanging.

use askgate_client::{Client, ConnectOptions};
use askgate_server::{ServerConfig, server::TlsConfig};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};

use crate::support::{TempDir, TestServer, test_config, within};

/// A CA, a server certificate for 127.0.0.1 and a client certificate, as PEM files.
pub struct Pki {
    pub dir: TempDir,
    pub ca_pem: Vec<u8>,
    client: (Vec<u8>, Vec<u8>),
}

impl Pki {
    pub fn new() -> Self {
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca =
            CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("key")).expect("CA");
        let leaf = |names: Vec<String>| {
            let key = KeyPair::generate().expect("key");
            let cert = CertificateParams::new(names)
                .expect("params")
                .signed_by(&key, &ca)
                .expect("sign");
            (cert.pem().into_bytes(), key.serialize_pem().into_bytes())
        };
        let server = leaf(vec!["127.0.0.1".into(), "localhost".into()]);
        let client = leaf(vec!["askgate-test-client".into()]);
        let dir = TempDir::new();
        dir.file("ca.pem", ca.pem());
        dir.file("server.pem", &server.0);
        dir.file("server.key", &server.1);
        Self {
            ca_pem: ca.pem().into_bytes(),
            dir,
            client,
        }
    }

    fn server_tls(&self, mutual: bool) -> TlsConfig {
        TlsConfig {
            cert: self.dir.0.join("server.pem"),
            key: self.dir.0.join("server.key"),
            client_ca: mutual.then(|| self.dir.0.join("ca.pem")),
        }
    }
}

async fn tls_server(pki: &Pki, mutual: bool) -> TestServer {
    TestServer::start_with(ServerConfig {
        tls: Some(pki.server_tls(mutual)),
        ..test_config()
    })
    .await
}

fn https(server: &TestServer) -> String {
    format!("https://{}", server.addr)
}

#[tokio::test]
async fn a_client_trusting_the_ca_talks_tls() {
    let pki = Pki::new();
    let server = tls_server(&pki, false).await;
    let options = ConnectOptions {
        ca_pem: Some(pki.ca_pem.clone()),
        ..Default::default()
    };
    let mut client = within("connect", Client::connect_with(https(&server), options))
        .await
        .expect("TLS connect");
    assert!(client.list_pending("s").await.expect("list").is_empty());
}

#[tokio::test]
async fn mtls_needs_a_client_certificate_signed_by_the_ca() {
    let pki = Pki::new();
    let server = tls_server(&pki, true).await;
    let without = ConnectOptions {
        ca_pem: Some(pki.ca_pem.clone()),
        ..Default::default()
    };
    let refused = within("connect without a certificate", async {
        let mut client = Client::connect_with(https(&server), without).await?;
        client.list_pending("s").await
    })
    .await;
    assert!(
        refused.is_err(),
        "a client without a certificate got through"
    );

    let with = ConnectOptions {
        ca_pem: Some(pki.ca_pem.clone()),
        identity: Some(pki.client.clone()),
        ..Default::default()
    };
    let mut client = within(
        "connect with a certificate",
        Client::connect_with(https(&server), with),
    )
    .await
    .expect("mTLS connect");
    assert!(client.list_pending("s").await.expect("list").is_empty());
}

#[tokio::test]
async fn plaintext_to_a_tls_port_fails_cleanly() {
    let pki = Pki::new();
    let server = tls_server(&pki, false).await;
    let result = within("a plaintext call", async {
        let mut client = Client::connect(server.url()).await?;
        client.list_pending("s").await
    })
    .await;
    // An error, promptly (the bounded wait above): the TLS port never speaks HTTP/2
    // in the clear, so the handshake itself fails.
    let err = result.expect_err("plaintext must fail");
    assert!(
        matches!(err.code(), tonic::Code::Unavailable | tonic::Code::Unknown),
        "{err}"
    );
}
