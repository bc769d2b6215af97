//! TLS in front of the real server, as a deployment terminates it in a proxy: a
//! certificate authority of the test's own (`TestCa`, made with rcgen, nothing on disk
//! but what a test writes) and a TLS-terminating proxy on a loopback port (`TlsProxy`)
//! whose certificate for 127.0.0.1 that CA signed. The server itself speaks plain HTTP.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

/// A private certificate authority, as an operator's internal one.
pub struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    /// Its certificate, PEM: what `--ca-file` names.
    pub pem: String,
}

impl TestCa {
    pub fn new() -> Self {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "ratekeeper test CA");
        let pem = params.self_signed(&key).unwrap().pem();
        Self {
            issuer: Issuer::new(params, key),
            pem,
        }
    }

    /// A server certificate for 127.0.0.1 and localhost, and its key.
    fn server_certificate(&self) -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
        let key = KeyPair::generate().unwrap();
        let params = CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()]).unwrap();
        let certificate = params.signed_by(&key, &self.issuer).unwrap();
        let key = PrivatePkcs8KeyDer::from(key.serialize_der());
        (certificate.der().clone(), key.into())
    }
}

/// Accepts TLS on a loopback port and passes the plain bytes on to `target`.
pub struct TlsProxy {
    /// `https://127.0.0.1:<port>`.
    pub url: String,
    listener: JoinHandle<()>,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl TlsProxy {
    pub async fn start(target: SocketAddr, ca: &TestCa) -> Self {
        let (certificate, key) = ca.server_certificate();
        // The provider named here, not installed for the whole test process.
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![certificate], key)
            .unwrap();
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}", listener.local_addr().unwrap());
        let connections: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let pipes = connections.clone();
        let listener = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                let pipe = tokio::spawn(async move {
                    // A client that refuses the certificate ends the handshake: nothing
                    // reaches the server.
                    let Ok(mut client) = acceptor.accept(client).await else {
                        return;
                    };
                    if let Ok(mut server) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                pipes.lock().unwrap().push(pipe);
            }
        });
        Self {
            url,
            listener,
            connections,
        }
    }
}

impl Drop for TlsProxy {
    fn drop(&mut self) {
        self.listener.abort();
        for pipe in self.connections.lock().unwrap().iter() {
            pipe.abort();
        }
    }
}
