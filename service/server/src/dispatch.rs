//! The node's gRPC services behind one match on the request's path.
//!
//! tonic's own router is an axum router: per call it clones the matched route's boxed
//! service (an allocation) and wraps its future in two more layers, about 660 bytes a
//! call that a blocked Ask holds for as long as it waits. A gRPC path is always
//! `/<package.Service>/<Method>`, so the service is found by its name alone: the
//! services here are cloned (reference counts, no allocation) and called directly.

use std::{
    convert::Infallible,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use bytes::Bytes;
use http::{Request, Response};
use tonic::{Status, body::Body, server::NamedService};
use tower::Service;

/// The future of one call, whichever service serves it.
pub type CallFuture = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

/// One service that can be called through a shared reference.
pub(crate) trait Route: Send + Sync {
    fn call(&self, request: Request<Body>) -> CallFuture;
}

impl<S, B> Route for S
where
    S: Service<Request<Body>, Response = Response<B>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<tonic::codegen::StdError>,
{
    fn call(&self, request: Request<Body>) -> CallFuture {
        // The services here are always ready (tonic's generated servers and the
        // interceptor around them do no back-pressure), so no `poll_ready` first.
        let call = Service::call(&mut self.clone(), request);
        Box::pin(async move { call.await.map(|response| response.map(Body::new)) })
    }
}

/// Every gRPC service of the node, by name. Cheap to clone.
#[derive(Clone, Default)]
pub struct Dispatch {
    routes: Arc<Vec<(String, Box<dyn Route>)>>,
}

impl Dispatch {
    /// Adds a service, served at `/<its name>/<method>`.
    pub(crate) fn serve<S>(mut self, service: S) -> Self
    where
        S: Route + NamedService + 'static,
    {
        let routes = Arc::get_mut(&mut self.routes).expect("routes are added before serving");
        routes.push((format!("/{}/", S::NAME), Box::new(service)));
        self
    }

    fn route(&self, path: &str) -> Option<&dyn Route> {
        self.routes
            .iter()
            .find(|(prefix, _)| path.starts_with(prefix.as_str()))
            .map(|(_, route)| &**route)
    }
}

impl Service<Request<Body>> for Dispatch {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = CallFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        match self.route(request.uri().path()) {
            Some(route) => route.call(request),
            // As tonic's router answers a path it does not serve.
            None => Box::pin(std::future::ready(Ok(
                Status::unimplemented("").into_http::<Body>()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone)]
    struct Named;

    impl NamedService for Named {
        const NAME: &'static str = "test.v1.Named";
    }

    impl Service<Request<Body>> for Named {
        type Response = Response<Body>;
        type Error = Infallible;
        type Future = std::future::Ready<Result<Response<Body>, Infallible>>;

        fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, request: Request<Body>) -> Self::Future {
            let mut response = Response::new(Body::empty());
            response
                .headers_mut()
                .insert("x-path", request.uri().path().parse().expect("a path"));
            std::future::ready(Ok(response))
        }
    }

    async fn call(dispatch: &mut Dispatch, path: &str) -> Response<Body> {
        let request = Request::builder()
            .uri(path)
            .body(Body::empty())
            .expect("a request");
        dispatch.call(request).await.expect("infallible")
    }

    #[tokio::test]
    async fn a_call_reaches_the_service_its_path_names_and_others_are_unimplemented() {
        let mut dispatch = Dispatch::default().serve(Named);
        let served = call(&mut dispatch, "/test.v1.Named/Method").await;
        assert_eq!(served.headers()["x-path"], "/test.v1.Named/Method");
        for path in [
            "/test.v1.NamedMore/Method",
            "/test.v1.Other/Method",
            "/",
            "/test.v1.Named",
        ] {
            let refused = call(&mut dispatch, path).await;
            assert_eq!(
                refused.headers()["grpc-status"],
                "12",
                "{path} is not a method of a served service"
            );
        }
    }
}
