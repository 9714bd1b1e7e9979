"""The management API function: Mangum over the api app, built once per sandbox."""

from mangum import Mangum

from core.http.api_app import create_api_app
from core.services import Services
from core.settings import load_settings

services = Services.from_settings(load_settings(), pool_max=2)
handler = Mangum(create_api_app(services), lifespan="off")
