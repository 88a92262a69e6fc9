// express4 is Express 4 installed under an alias (npm:express@4) to run the suite on both majors.
declare module 'express4' {
  import express from 'express';
  export default express;
}
